package gui

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/widget"

	"strata/app/remote"
	"strata/app/store"
	"strata/engine"
)

// remoteModel is a model on another machine behind the app's Model interface: the chat,
// presets, stop, regenerate and saved chats work as with a local one; it has no tiers.
type remoteModel struct{ m *remote.Model }

func (r remoteModel) Info() engine.ModelInfo {
	info := r.m.Info()
	if u, err := url.Parse(r.m.Client().BaseURL()); err == nil {
		info.Name = r.m.ID() + " on " + u.Host
	}
	return info
}

func (r remoteModel) Config() engine.Config      { return engine.Config{} }
func (r remoteModel) Tiers() engine.TierSnapshot { return engine.TierSnapshot{} }
func (r remoteModel) Close() error               { return nil }
func (r remoteModel) NewSession(engine.SessionOptions) Session {
	return r.m
}

// RemoteModels lists the models a server serves (for the picker's dialog).
func (c *Controller) RemoteModels(ctx context.Context, baseURL, key string) ([]string, error) {
	cl, err := remote.NewClient(baseURL, key)
	if err != nil {
		return nil, err
	}
	return cl.Models(ctx)
}

// ConnectRemote closes the loaded model and chats with model on the server from now on.
// It returns when connected, or with the reason it could not.
func (c *Controller) ConnectRemote(ctx context.Context, baseURL, key, model string) error {
	cl, err := remote.NewClient(baseURL, key)
	if err != nil {
		return err
	}
	start := c.now()
	m, err := remote.Connect(ctx, cl, model)
	if err != nil {
		return err
	}
	c.StopGeneration()
	c.mu.Lock()
	if c.loading {
		c.mu.Unlock()
		return errors.New("a model is loading; cancel it first")
	}
	old := c.model
	c.model, c.modelPath, c.demo = remoteModel{m}, cl.BaseURL()+"#"+model, false
	c.ready = c.now().Sub(start)
	c.loadErr = nil
	c.chat.session = c.model.NewSession(engine.SessionOptions{})
	c.chat.err = ""
	c.settings.Remote = store.Remote{URL: baseURL, APIKey: key, Model: model}
	s := c.settings
	c.mu.Unlock()
	if old != nil {
		if err := c.closeModel(old); err != nil {
			return fmt.Errorf("closing the local model: %w", err)
		}
	}
	if err := c.saveSettings(s); err != nil {
		return err
	}
	c.notify(topicLoad)
	c.notify(topicChat)
	return nil
}

// RemoteURL is the server the chat runs on, or "" when the model is local.
func (c *Controller) RemoteURL() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r, ok := c.model.(remoteModel); ok {
		return r.m.Client().BaseURL()
	}
	return ""
}

// cutMark tells an answer whose stream broke from one that ended.
func cutMark(err error) bool { return errors.Is(err, remote.ErrStreamCut) }

// connectDialog is "Connect to a server": an address, an optional key, and one of the
// models the server lists.
func (a *App) connectDialog() {
	last := a.ctl.Settings().Remote
	addr := widget.NewEntry()
	addr.SetPlaceHolder("http://192.168.1.20:8000")
	addr.SetText(last.URL)
	key := widget.NewPasswordEntry()
	key.SetPlaceHolder("optional")
	key.SetText(last.APIKey)
	models := widget.NewSelect(nil, nil)
	models.PlaceHolder = "press List models"
	status := widget.NewLabel("vLLM, SGLang, llama-server or another Strata: any server that speaks the OpenAI API.")
	status.Wrapping = fyne.TextWrapWord
	var dlg *dialog.CustomDialog
	var connect *widget.Button
	list := widget.NewButton("List models", nil)
	list.OnTapped = func() {
		status.SetText("Asking " + addr.Text + " …")
		u, k := addr.Text, key.Text
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			ids, err := a.ctl.RemoteModels(ctx, u, k)
			a.post(func() {
				if err != nil {
					status.SetText(friendly("Listing the server's models", err))
					return
				}
				if len(ids) == 0 {
					status.SetText("The server lists no models.")
					return
				}
				models.SetOptions(ids)
				pick := ids[0]
				for _, id := range ids {
					if id == last.Model {
						pick = id
					}
				}
				models.SetSelected(pick)
				status.SetText(fmt.Sprintf("%d model(s) on the server.", len(ids)))
				connect.Enable()
			})
		}()
	}
	connect = widget.NewButton("Connect", func() {
		if models.Selected == "" {
			return
		}
		status.SetText("Connecting …")
		u, k, m := addr.Text, key.Text, models.Selected
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			err := a.ctl.ConnectRemote(ctx, u, k, m)
			a.post(func() {
				if err != nil {
					status.SetText(friendly("Connecting to the server", err))
					return
				}
				dlg.Hide()
				a.Show(ScreenChat)
			})
		}()
	})
	connect.Importance = widget.HighImportance
	connect.Disable()
	form := widget.NewForm(
		widget.NewFormItem("Server address", addr),
		widget.NewFormItem("API key", key),
		widget.NewFormItem("Model", models),
	)
	content := container.NewVBox(form, status, container.NewHBox(list, connect))
	dlg = dialog.NewCustom("Connect to a server", "Cancel", content, a.win)
	dlg.Resize(fyne.NewSize(560, 340))
	dlg.Show()
}

// emptyTiersText is what the tier map says when it has nothing to draw.
func emptyTiersText(remoteURL string) string {
	if remoteURL != "" {
		return "This model runs remotely, on the server at " + remoteURL + ": its experts live in that machine's memory, so there is no tier map here."
	}
	return "Load a model to see where its experts live."
}
