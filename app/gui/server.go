package gui

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"strata/app/serve"
	"strata/app/store"
)

// serverHost is where the app's server listens: this PC only. Serving other machines is
// `strata serve --host ... --api-key ...`'s job.
const serverHost = "127.0.0.1"

// serverState is the app's OpenAI-compatible server while it runs.
type serverState struct {
	http    *http.Server
	api     *serve.Server
	url     string // base URL clients use, ".../v1"
	err     error  // why the last start failed
	backend *serve.Local
	model   Model // the model backend serves
}

// served is the loaded model as the server sees it: the app's own engine model (one copy
// in memory), or nil while none is loaded or the chat runs on a remote server.
func (c *Controller) served() serve.Backend {
	c.mu.Lock()
	defer c.mu.Unlock()
	em, ok := c.model.(engineModel)
	if !ok || c.loading {
		c.server.backend, c.server.model = nil, nil
		return nil
	}
	if c.server.model != c.model {
		c.server.backend, c.server.model = serve.NewLocal(em.Model, c.sessionOptionsLocked().ContextPolicy), c.model
	}
	return c.server.backend
}

// SetServer saves the server settings and starts, restarts or stops the server to match.
func (c *Controller) SetServer(enabled bool, portText, key string) error {
	port, err := strconv.Atoi(strings.TrimSpace(portText))
	if err != nil || port < 0 || port > 65535 {
		return fmt.Errorf("the port must be a number from 0 to 65535 (0 picks a free one), not %q", portText)
	}
	s := c.Settings()
	s.Server = store.Server{Enabled: enabled, Port: port, APIKey: strings.TrimSpace(key)}
	if err := c.saveSettings(s); err != nil {
		return err
	}
	c.stopServer()
	if enabled {
		err = c.startServer(s.Server)
	}
	c.notify(topicChat)
	return err
}

// startServerFromSettings starts the server when the settings say it is on.
func (c *Controller) startServerFromSettings() {
	if s := c.Settings().Server; s.Enabled {
		if err := c.startServer(s); err != nil {
			slog.Warn("server", "err", err)
		}
	}
}

func (c *Controller) startServer(s store.Server) error {
	ln, err := serve.Listen(serverHost, s.Port, s.APIKey)
	if err != nil {
		c.mu.Lock()
		c.server.err = err
		c.mu.Unlock()
		return err
	}
	api := serve.New(c.served, serve.Options{APIKey: s.APIKey})
	srv := serve.HTTPServer(api)
	c.mu.Lock()
	c.server.http, c.server.api, c.server.url, c.server.err = srv, api, serve.URL(ln), nil
	c.mu.Unlock()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			slog.Warn("server stopped", "err", err)
			c.mu.Lock()
			if c.server.http == srv {
				c.server.http, c.server.url, c.server.err = nil, "", err
			}
			c.mu.Unlock()
			c.notify(topicChat)
		}
	}()
	return nil
}

// stopServer ends the server; answers being streamed are cut, and it returns once no
// request uses the engine any more.
func (c *Controller) stopServer() {
	c.mu.Lock()
	srv, api := c.server.http, c.server.api
	c.server.http, c.server.api, c.server.url, c.server.err = nil, nil, "", nil
	c.mu.Unlock()
	if srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if srv.Shutdown(ctx) != nil {
		srv.Close()
	}
	api.Idle() // held for good: this server is finished
}

// closeModel closes a model the app no longer holds, first stopping whatever answer the
// server is writing with it.
func (c *Controller) closeModel(m Model) error {
	c.mu.Lock()
	api := c.server.api
	c.mu.Unlock()
	if api != nil {
		defer api.Idle()()
	}
	return m.Close()
}

// ServerStatus says whether the server runs, where, and what the last start ran into.
func (c *Controller) ServerStatus() (url string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.server.url, c.server.err
}

// serverLine is the server's state in a few words, shown next to the model's name.
func (c *Controller) serverLine() string {
	url, err := c.ServerStatus()
	switch {
	case err != nil:
		return "server off: " + err.Error()
	case url == "":
		return ""
	}
	c.mu.Lock()
	_, local := c.model.(engineModel)
	c.mu.Unlock()
	if !local {
		return "server at " + url + " (no local model to serve)"
	}
	return "serving at " + url
}

// serverPanel is the server switch in the settings tab: on/off, port, key and the status.
type serverPanel struct {
	a      *App
	root   fyne.CanvasObject
	on     *widget.Check
	port   *widget.Entry
	key    *widget.Entry
	status *widget.Label
}

func (a *App) newServerPanel() *serverPanel {
	p := &serverPanel{a: a}
	s := a.ctl.Settings().Server
	p.on = widget.NewCheck("Serve the loaded model to other programs (OpenAI API)", nil)
	p.on.SetChecked(s.Enabled)
	p.port = widget.NewEntry()
	p.port.SetText(strconv.Itoa(s.Port))
	p.key = widget.NewPasswordEntry()
	p.key.SetPlaceHolder("optional")
	p.key.SetText(s.APIKey)
	p.status = widget.NewLabel("")
	p.status.Wrapping = fyne.TextWrapWord
	apply := widget.NewButtonWithIcon("Apply server", theme.ConfirmIcon(), p.apply)
	form := widget.NewForm(
		widget.NewFormItem("", p.on),
		widget.NewFormItem("Port", p.port),
		widget.NewFormItem("API key", p.key),
	)
	title := widget.NewLabelWithStyle("Server", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	p.root = container.NewVBox(widget.NewSeparator(), title, form, container.NewBorder(nil, nil, nil, apply, p.status))
	p.update()
	return p
}

func (p *serverPanel) apply() {
	if err := p.a.ctl.SetServer(p.on.Checked, p.port.Text, p.key.Text); err != nil {
		p.status.SetText("Not applied: " + err.Error())
		p.status.Importance = widget.DangerImportance
		p.status.Refresh()
		return
	}
	p.update()
}

// update shows the server's state.
func (p *serverPanel) update() {
	url, err := p.a.ctl.ServerStatus()
	switch {
	case err != nil:
		p.status.SetText("Off: " + err.Error())
		p.status.Importance = widget.DangerImportance
	case url != "":
		p.status.SetText("On at " + url + " · programs use it as an OpenAI base URL, model list at " + url + "/models")
		p.status.Importance = widget.SuccessImportance
	default:
		p.status.SetText("Off.")
		p.status.Importance = widget.MediumImportance
	}
	p.status.Refresh()
}

// serverSuffix is serverLine for the chat's banner: " · serving at URL", or "".
func (c *Controller) serverSuffix() string {
	if line := c.serverLine(); line != "" {
		return " · " + line
	}
	return ""
}
