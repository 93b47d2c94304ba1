package gui

import (
	"slices"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"strata/app/store"
	"strata/engine"
)

// chatView is the chat tab: the sidebar of chats, the conversation, and the message box
// with its sampling controls.
type chatView struct {
	a    *App
	root fyne.CanvasObject

	list    *widget.List
	chats   []store.Chat
	listing bool // the list is being refreshed: selection events are not the user's

	banner   *widget.Label
	errText  *widget.Label
	messages *fyne.Container
	scroll   *container.Scroll
	shown    []store.Message // what messages holds, to redraw only what changed

	input      *promptEntry
	send       *widget.Button
	stop       *widget.Button
	regenerate *widget.Button
	edit       *widget.Button
	system     *widget.Entry
	presetSel  *widget.Select
	advanced   advancedForm
}

// readingWidth is the widest the conversation's text runs (about 100 characters a line).
const readingWidth = 880

// advancedForm holds the advanced sampling section's entries.
type advancedForm struct {
	temperature, topK, topP, minP, repeat, maxTokens, seed *widget.Entry
}

func (f advancedForm) fields() advancedFields {
	return advancedFields{
		Temperature: f.temperature.Text, TopK: f.topK.Text, TopP: f.topP.Text, MinP: f.minP.Text,
		RepeatPenalty: f.repeat.Text, MaxTokens: f.maxTokens.Text, Seed: f.seed.Text,
	}
}

func (f advancedForm) set(a advancedFields) {
	f.temperature.SetText(a.Temperature)
	f.topK.SetText(a.TopK)
	f.topP.SetText(a.TopP)
	f.minP.SetText(a.MinP)
	f.repeat.SetText(a.RepeatPenalty)
	f.maxTokens.SetText(a.MaxTokens)
	f.seed.SetText(a.Seed)
}

func (a *App) newChatView() *chatView {
	v := &chatView{a: a}
	v.root = container.NewHSplit(v.sidebar(), v.conversation())
	v.root.(*container.Split).Offset = 0.22
	return v
}

// sidebar lists the saved chats with new, rename and delete.
func (v *chatView) sidebar() fyne.CanvasObject {
	v.list = widget.NewList(
		func() int { return len(v.chats) },
		func() fyne.CanvasObject {
			l := widget.NewLabel("chat title")
			l.Truncation = fyne.TextTruncateEllipsis // long titles end in "…", not cut mid-letter
			return l
		},
		func(i widget.ListItemID, o fyne.CanvasObject) {
			if i < len(v.chats) {
				o.(*widget.Label).SetText(v.chats[i].Title)
			}
		})
	v.list.OnSelected = func(i widget.ListItemID) {
		if v.listing || i >= len(v.chats) {
			return
		}
		if err := v.a.ctl.SelectChat(v.chats[i].ID); err != nil {
			v.a.showError("Opening the chat", err)
		}
	}
	newChat := widget.NewButtonWithIcon("New chat", theme.ContentAddIcon(), func() {
		if err := v.a.ctl.NewChat(); err != nil {
			v.a.showMessage("New chat", err.Error())
		}
		v.list.UnselectAll()
	})
	rename := widget.NewButtonWithIcon("Rename", theme.DocumentCreateIcon(), v.renameDialog)
	del := widget.NewButtonWithIcon("Delete", theme.DeleteIcon(), v.deleteDialog)
	model := widget.NewButtonWithIcon("Models", theme.FolderOpenIcon(), func() { v.a.Show(ScreenPicker) })
	// The buttons wrap, so a narrow sidebar leaves the conversation its room.
	return container.NewBorder(newChat, newFlow(flowLeading, rename, del, model), nil, nil, v.list)
}

// renameDialog asks for the open chat's new name: the name is selected and has the focus,
// Enter renames, and the dialog is wide enough to show a long name.
func (v *chatView) renameDialog() {
	cur := v.a.ctl.Chat().Chat
	name := widget.NewEntry()
	name.SetText(cur.Title)
	d := dialog.NewForm("Rename chat", "Rename", "Cancel", []*widget.FormItem{widget.NewFormItem("Name", name)}, func(ok bool) {
		defer v.focusInput()
		if !ok {
			return
		}
		if err := v.a.ctl.RenameChat(cur.ID, name.Text); err != nil {
			v.a.showError("Renaming the chat", err)
		}
	}, v.a.win)
	name.OnSubmitted = func(string) { d.Submit() }
	d.Resize(fyne.NewSize(460, d.MinSize().Height))
	d.Show()
	v.a.win.Canvas().Focus(name)
	name.TypedShortcut(&fyne.ShortcutSelectAll{})
}

func (v *chatView) deleteDialog() {
	cur := v.a.ctl.Chat().Chat
	d := dialog.NewConfirm("Delete chat", "Delete “"+cur.Title+"”? This cannot be undone.", func(ok bool) {
		if !ok {
			return
		}
		if err := v.a.ctl.DeleteChat(cur.ID); err != nil {
			v.a.showError("Deleting the chat", err)
		}
	}, v.a.win)
	v.a.showKeyed(d, d.Confirm)
}

// focusInput puts the keyboard back in the message box (after a dialog, a tab switch or
// a button), so the next message can be typed at once.
func (v *chatView) focusInput() {
	if v.a.dialog == nil { // a dialog opened meanwhile (an error) keeps the keyboard
		v.a.win.Canvas().Focus(v.input)
	}
}

// conversation is the messages and, under them, the message box and its controls.
func (v *chatView) conversation() fyne.CanvasObject {
	v.banner = widget.NewLabel("")
	v.banner.Wrapping = fyne.TextWrapWord
	v.errText = widget.NewLabel("")
	v.errText.Wrapping = fyne.TextWrapWord
	v.errText.Importance = widget.DangerImportance
	v.errText.Hide()
	v.messages = container.NewVBox()
	// Answers keep a readable line length on a wide screen.
	v.scroll = container.NewVScroll(capWidth(readingWidth, v.messages))

	v.input = newPromptEntry(v.sendInput, v.a.ctl.Stop)
	v.input.SetMinRowsVisible(3)
	v.send = widget.NewButtonWithIcon("Send", theme.MailSendIcon(), v.sendInput)
	v.send.Importance = widget.HighImportance
	v.stop = widget.NewButtonWithIcon("Stop", theme.MediaStopIcon(), v.a.ctl.Stop)
	v.regenerate = widget.NewButtonWithIcon("Regenerate", theme.ViewRefreshIcon(), func() {
		if err := v.a.ctl.Regenerate(); err != nil {
			v.a.showMessage("Regenerate", err.Error())
		}
		v.focusInput()
	})
	v.edit = widget.NewButtonWithIcon("Edit last", theme.DocumentCreateIcon(), v.editLast)

	v.system = widget.NewMultiLineEntry()
	v.system.SetPlaceHolder("For example: You are a concise assistant. Answer in English.")
	v.system.SetMinRowsVisible(2)
	v.system.OnChanged = v.a.ctl.SetSystem

	sp, name := v.a.ctl.Sampling()
	v.presetSel = widget.NewSelect(presetNames(), func(p string) {
		v.a.ctl.SetPreset(p)
		if v.advanced.seed != nil {
			s, _ := v.a.ctl.Sampling()
			v.advanced.set(fieldsOf(s))
		}
	})
	v.advanced = advancedForm{
		temperature: widget.NewEntry(), topK: widget.NewEntry(), topP: widget.NewEntry(), minP: widget.NewEntry(),
		repeat: widget.NewEntry(), maxTokens: widget.NewEntry(), seed: widget.NewEntry(),
	}
	v.advanced.set(fieldsOf(sp))
	v.presetSel.SetSelected(name)
	apply := widget.NewButton("Apply", func() {
		if err := v.a.ctl.SetAdvanced(v.advanced.fields()); err != nil {
			v.a.showMessage("Sampling", "That value cannot be used: "+err.Error())
		}
	})
	adv := widget.NewForm(
		widget.NewFormItem("Temperature", v.advanced.temperature),
		widget.NewFormItem("Top-k (0 = off)", v.advanced.topK),
		widget.NewFormItem("Top-p", v.advanced.topP),
		widget.NewFormItem("Min-p", v.advanced.minP),
		widget.NewFormItem("Repeat penalty", v.advanced.repeat),
		widget.NewFormItem("Max tokens (0 = no limit)", v.advanced.maxTokens),
		widget.NewFormItem("Seed", v.advanced.seed),
	)
	options := widget.NewAccordion(
		widget.NewAccordionItem("System prompt", v.system),
		widget.NewAccordionItem("Advanced sampling", container.NewVBox(adv, container.NewHBox(layoutSpacer(), apply))),
	)
	// The actions wrap under the sampling choice in a narrow window, Send staying last.
	buttons := newFlow(flowSpread, container.NewHBox(widget.NewLabel("Sampling"), v.presetSel),
		container.NewHBox(v.edit, v.regenerate, v.stop, v.send))
	bottom := container.NewVBox(options, v.input, buttons)
	return container.NewBorder(container.NewVBox(v.banner, v.errText), bottom, nil, nil, v.scroll)
}

func (v *chatView) sendInput() {
	text := v.input.Text
	if strings.TrimSpace(text) == "" {
		return
	}
	if err := v.a.ctl.Send(text); err != nil {
		v.a.showMessage("Not sent", err.Error())
		return
	}
	v.input.SetText("")
	v.focusInput()
}

func (v *chatView) editLast() {
	last := v.a.ctl.LastUserMessage()
	if last == "" {
		v.a.showMessage("Edit", "There is no message to edit yet.")
		return
	}
	e := widget.NewMultiLineEntry()
	e.SetText(last)
	e.SetMinRowsVisible(5)
	d := dialog.NewForm("Edit and resend", "Resend", "Cancel", []*widget.FormItem{widget.NewFormItem("", e)}, func(ok bool) {
		defer v.focusInput()
		if !ok {
			return
		}
		if err := v.a.ctl.EditLast(e.Text); err != nil {
			v.a.showMessage("Not sent", err.Error())
		}
	}, v.a.win)
	d.Resize(fyne.NewSize(640, d.MinSize().Height)) // room for a message of a few lines
	d.Show()
	v.a.win.Canvas().Focus(e)
}

// update redraws the conversation; only messages that changed are rebuilt, so streaming
// touches one message per batch.
func (v *chatView) update(cv ChatView) {
	st := v.a.ctl.LoadState()
	switch {
	case cv.Demo:
		v.banner.SetText("Demo model: random weights made on the spot. Its answers are noise; it is here to show how Strata works. " + readyText(st.Ready) + ".")
		v.banner.Importance = widget.WarningImportance
	case cv.HasModel:
		v.banner.SetText(st.Info.Name + " · " + readyText(st.Ready) + v.a.ctl.serverSuffix())
		v.banner.Importance = widget.MediumImportance
	default:
		v.banner.SetText("No model is loaded. Choose Models to open one, or try the demo.")
		v.banner.Importance = widget.WarningImportance
	}
	v.banner.Refresh()
	if cv.Err != "" {
		v.errText.SetText(cv.Err)
		v.errText.Show()
	} else {
		v.errText.Hide()
	}
	if v.system.Text != cv.Chat.System {
		v.system.SetText(cv.Chat.System)
	}

	msgs := cv.Chat.Messages
	if len(msgs) < len(v.shown) {
		v.messages.RemoveAll()
		v.shown = nil
	}
	for i, m := range msgs {
		last := i == len(msgs)-1
		view := v.messageView(m, last && cv.Generating)
		switch {
		case i >= len(v.shown):
			v.messages.Add(view)
			v.shown = append(v.shown, m)
		case v.shown[i] != m:
			v.messages.Objects[i] = view
			v.shown[i] = m
			v.messages.Refresh()
		}
	}
	v.scroll.ScrollToBottom()

	if cv.Generating {
		v.stop.Enable()
		v.send.Disable()
		v.regenerate.Disable()
		v.edit.Disable()
	} else {
		v.stop.Disable()
		v.send.Enable()
		// Only what can be done looks like it can: a new chat has nothing to edit or
		// write again.
		setEnabled(v.edit, lastUser(msgs) >= 0)
		setEnabled(v.regenerate, len(msgs) > 0 && msgs[len(msgs)-1].Role == string(engine.RoleAssistant))
	}
}

// updateList reloads the sidebar. The open chat is listed from its first message on: it
// is saved only once its first answer is written.
func (v *chatView) updateList() {
	chats, err := v.a.ctl.Chats()
	if err != nil {
		v.errText.SetText(friendly("Reading saved chats", err))
		v.errText.Show()
	}
	open := v.a.ctl.Chat().Chat
	cur := open.ID
	if len(open.Messages) > 0 && !slices.ContainsFunc(chats, func(ch store.Chat) bool { return ch.ID == cur }) {
		chats = append([]store.Chat{open}, chats...)
	}
	v.chats = chats
	v.listing = true
	v.list.Refresh()
	v.list.UnselectAll()
	for i, ch := range chats {
		if ch.ID == cur {
			v.list.Select(i)
		}
	}
	v.listing = false
}

// messageView draws one message: who, the thinking folded away, the answer as Markdown
// with code blocks that have a copy button, and tokens/s.
func (v *chatView) messageView(m store.Message, writing bool) fyne.CanvasObject {
	box := container.NewVBox()
	who := "You"
	if m.Role == string(engine.RoleAssistant) {
		who = "Strata"
	}
	box.Add(widget.NewLabelWithStyle(who, fyne.TextAlignLeading, fyne.TextStyle{Bold: true}))
	if m.Thinking != "" {
		box.Add(widget.NewAccordion(widget.NewAccordionItem("Thinking", secondaryText(m.Thinking))))
	}
	for _, b := range splitBlocks(m.Content) {
		box.Add(v.blockView(b))
	}
	if writing && m.Content == "" {
		box.Add(widget.NewProgressBarInfinite())
	}
	if s := tokensPerSecLabel(m); s != "" {
		box.Add(secondaryText(s))
	}
	if m.Role == string(engine.RoleUser) {
		return widget.NewCard("", "", box)
	}
	return box
}

// blockView draws prose as Markdown and code monospace with a copy button.
func (v *chatView) blockView(b block) fyne.CanvasObject {
	if !b.Code {
		return proseView(b.Text)
	}
	code := widget.NewRichText(&widget.TextSegment{Style: widget.RichTextStyleCodeBlock, Text: b.Text})
	code.Wrapping = fyne.TextWrapOff
	text := b.Text
	copyBtn := widget.NewButtonWithIcon("Copy", theme.ContentCopyIcon(), func() {
		v.a.fy.Clipboard().SetContent(text)
	})
	lang := secondaryText(b.Lang)
	lang.Wrapping = fyne.TextWrapOff
	return widget.NewCard("", "", container.NewBorder(container.NewHBox(lang, layoutSpacer(), copyBtn), nil, nil, nil, container.NewHScroll(code)))
}

func setEnabled(w fyne.Disableable, on bool) {
	if on {
		w.Enable()
	} else {
		w.Disable()
	}
}
