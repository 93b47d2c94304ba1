package gui

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"strata/app/store"
	"strata/engine"
)

// streamEvery is how often streamed tokens are pushed to the screen: one refresh per batch
// of tokens instead of one per token keeps the UI goroutine idle during generation.
const streamEvery = 60 * time.Millisecond

// newChatTitle names a chat until its first message does.
const newChatTitle = "New chat"

// chatState is the open chat and its generation, guarded by Controller.mu.
type chatState struct {
	cur        store.Chat
	session    Session
	generating bool
	cancel     context.CancelFunc
	done       chan struct{} // closed when the running generation has finished
	dirty      bool
	err        string
	sampling   engine.Sampling
	preset     string
}

func (c *Controller) freshChat() store.Chat {
	ch := store.NewChat(newChatTitle, c.now())
	ch.System = c.settings.SystemPrompt
	return ch
}

// ChatView is a copy of the open chat for drawing.
type ChatView struct {
	Chat       store.Chat
	Generating bool
	Err        string
	HasModel   bool
	Demo       bool
}

// Chat returns the open chat.
func (c *Controller) Chat() ChatView {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := c.chat.cur
	ch.Messages = append([]store.Message(nil), ch.Messages...)
	return ChatView{Chat: ch, Generating: c.chat.generating, Err: c.chat.err, HasModel: c.chat.session != nil, Demo: c.demo}
}

// Chats lists the saved chats for the sidebar, newest first.
func (c *Controller) Chats() ([]store.Chat, error) { return c.chats.List() }

// NewChat starts an empty chat.
func (c *Controller) NewChat() error {
	c.mu.Lock()
	if c.chat.generating {
		c.mu.Unlock()
		return errors.New("stop the answer being written first")
	}
	c.chat.cur = c.freshChat()
	c.chat.err = ""
	c.resetSessionLocked()
	c.mu.Unlock()
	c.notify(topicChat)
	return nil
}

// resetSessionLocked starts a fresh KV cache for a different conversation.
func (c *Controller) resetSessionLocked() {
	if c.model != nil {
		c.chat.session = c.model.NewSession(c.sessionOptionsLocked())
	}
}

// sessionOptionsLocked are the settings' session options: what a full chat does.
func (c *Controller) sessionOptionsLocked() engine.SessionOptions {
	p, err := engine.ParseContextPolicy(c.settings.ContextFull)
	if err != nil {
		p = engine.ContextStop
	}
	return engine.SessionOptions{ContextPolicy: p}
}

// SetContextPolicy saves what a chat does when it reaches the context length; the next
// answer follows it.
func (c *Controller) SetContextPolicy(p engine.ContextPolicy) error {
	s := c.Settings()
	s.ContextFull = string(p)
	if err := c.saveSettings(s); err != nil {
		return err
	}
	c.mu.Lock()
	if !c.chat.generating {
		c.resetSessionLocked()
	}
	c.mu.Unlock()
	return nil
}

// contextNotice tells the user what reaching the context length did to this answer, or "".
func contextNotice(res engine.Result) string {
	switch {
	case res.Dropped > 0:
		return fmt.Sprintf("This chat is longer than the model's context: the oldest %d messages were left out of what the model saw (the system prompt was kept).", res.Dropped)
	case res.Stop == engine.StopContext:
		return "The answer stopped because the chat filled the model's context. Start a new chat, or in Settings choose to drop the oldest turns."
	}
	return ""
}

// SelectChat opens a saved chat.
func (c *Controller) SelectChat(id string) error {
	ch, err := c.chats.Load(id)
	if err != nil {
		return err
	}
	c.mu.Lock()
	if c.chat.generating {
		c.mu.Unlock()
		return errors.New("stop the answer being written first")
	}
	c.chat.cur = ch
	c.chat.err = ""
	c.resetSessionLocked()
	c.mu.Unlock()
	c.notify(topicChat)
	return nil
}

// RenameChat retitles a chat (the open one or a saved one).
func (c *Controller) RenameChat(id, title string) error {
	title = strings.TrimSpace(title)
	if title == "" {
		return errors.New("a chat needs a name")
	}
	c.mu.Lock()
	open := c.chat.cur.ID == id
	if open {
		c.chat.cur.Title = title
	}
	ch := c.chat.cur
	c.mu.Unlock()
	var err error
	if open {
		if len(ch.Messages) > 0 {
			err = c.chats.Save(ch)
		}
	} else {
		err = c.chats.Rename(id, title)
	}
	c.notify(topicChats)
	c.notify(topicChat)
	return err
}

// DeleteChat removes a chat; deleting the open one opens a new empty chat.
func (c *Controller) DeleteChat(id string) error {
	c.mu.Lock()
	open := c.chat.cur.ID == id
	if open && c.chat.generating {
		c.mu.Unlock()
		return errors.New("stop the answer being written first")
	}
	c.mu.Unlock()
	err := c.chats.Delete(id)
	if errors.Is(err, store.ErrNotFound) && open {
		err = nil // never saved: nothing to delete on disk
	}
	if err != nil {
		return err
	}
	if open {
		c.mu.Lock()
		c.chat.cur = c.freshChat()
		c.resetSessionLocked()
		c.mu.Unlock()
	}
	c.notify(topicChats)
	c.notify(topicChat)
	return nil
}

// SetSystem sets the open chat's system prompt; the next Send also makes it the default for
// new chats (saved then, not on every keystroke).
func (c *Controller) SetSystem(text string) {
	c.mu.Lock()
	c.chat.cur.System = text
	c.mu.Unlock()
}

// rememberSystem saves the system prompt as the default for new chats when it changed.
func (c *Controller) rememberSystem(text string) {
	s := c.Settings()
	if s.SystemPrompt == text {
		return
	}
	s.SystemPrompt = text
	if err := c.saveSettings(s); err != nil {
		slog.Warn("saving the system prompt", "err", err)
	}
}

// SetPreset picks a sampling preset.
func (c *Controller) SetPreset(name string) {
	c.mu.Lock()
	c.chat.preset, c.chat.sampling = name, preset(name)
	s := c.settings
	c.mu.Unlock()
	if s.Preset != name {
		s.Preset = name
		if err := c.saveSettings(s); err != nil {
			slog.Warn("saving preset", "err", err)
		}
	}
}

// SetAdvanced applies the advanced sampling section.
func (c *Controller) SetAdvanced(f advancedFields) error {
	sp, err := parseSampling(f)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.chat.sampling = sp
	c.mu.Unlock()
	return nil
}

// Sampling is the sampling the next answer uses, and its preset's name.
func (c *Controller) Sampling() (engine.Sampling, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.chat.sampling, c.chat.preset
}

// Send adds a user message and starts the answer.
func (c *Controller) Send(text string) error {
	text = strings.TrimSpace(text)
	if text == "" {
		return nil
	}
	c.mu.Lock()
	if err := c.canGenerateLocked(); err != nil {
		c.mu.Unlock()
		return err
	}
	if len(c.chat.cur.Messages) == 0 && c.chat.cur.Title == newChatTitle {
		c.chat.cur.Title = titleFrom(text)
	}
	c.chat.cur.Messages = append(c.chat.cur.Messages, store.Message{Role: string(engine.RoleUser), Content: text})
	system := c.chat.cur.System
	c.startLocked()
	c.mu.Unlock()
	c.rememberSystem(system)
	c.notify(topicChats)
	c.notify(topicChat)
	return nil
}

// Regenerate replaces the last answer with a new one.
func (c *Controller) Regenerate() error {
	c.mu.Lock()
	if err := c.canGenerateLocked(); err != nil {
		c.mu.Unlock()
		return err
	}
	msgs := c.chat.cur.Messages
	if len(msgs) == 0 || msgs[len(msgs)-1].Role != string(engine.RoleAssistant) {
		c.mu.Unlock()
		return errors.New("there is no answer to write again")
	}
	c.chat.cur.Messages = msgs[:len(msgs)-1]
	c.startLocked()
	c.mu.Unlock()
	c.notify(topicChat)
	return nil
}

// LastUserMessage is the text "edit and resend" starts from.
func (c *Controller) LastUserMessage() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i := lastUser(c.chat.cur.Messages); i >= 0 {
		return c.chat.cur.Messages[i].Content
	}
	return ""
}

// EditLast replaces the last user message (and the answer after it) with text and resends.
func (c *Controller) EditLast(text string) error {
	if strings.TrimSpace(text) == "" {
		return errors.New("the message is empty")
	}
	c.mu.Lock()
	if err := c.canGenerateLocked(); err != nil {
		c.mu.Unlock()
		return err
	}
	i := lastUser(c.chat.cur.Messages)
	if i < 0 {
		c.mu.Unlock()
		return errors.New("there is no message to edit")
	}
	c.chat.cur.Messages = c.chat.cur.Messages[:i]
	c.mu.Unlock()
	return c.Send(text)
}

func lastUser(msgs []store.Message) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == string(engine.RoleUser) {
			return i
		}
	}
	return -1
}

// Stop asks the answer being written to stop; it returns at once (Esc and the Stop button).
func (c *Controller) Stop() {
	c.mu.Lock()
	cancel := c.chat.cancel
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// StopGeneration stops the answer being written and waits until it has stopped.
func (c *Controller) StopGeneration() {
	c.mu.Lock()
	cancel, done := c.chat.cancel, c.chat.done
	c.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

// Wait blocks until the running answer (if any) is finished.
func (c *Controller) Wait() {
	c.mu.Lock()
	done := c.chat.done
	c.mu.Unlock()
	if done != nil {
		<-done
	}
}

func (c *Controller) canGenerateLocked() error {
	switch {
	case c.chat.generating:
		return errors.New("an answer is still being written; press Stop first")
	case c.loading:
		return errors.New("the model is still loading")
	case c.chat.session == nil:
		return errors.New("no model is loaded: open a model or try the demo first")
	}
	return nil
}

// startLocked appends an empty answer and generates it in the background.
func (c *Controller) startLocked() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	c.chat.generating, c.chat.cancel, c.chat.done, c.chat.err = true, cancel, done, ""
	msgs := toEngine(c.chat.cur.System, c.chat.cur.Messages)
	c.chat.cur.Messages = append(c.chat.cur.Messages, store.Message{Role: string(engine.RoleAssistant)})
	c.chat.cur.Updated = c.now()
	sess, sp, id := c.chat.session, c.chat.sampling, c.chat.cur.ID

	go func() {
		defer close(done)
		stopFlush := make(chan struct{})
		go c.flushLoop(stopFlush)
		res, err := sess.Chat(ctx, msgs, sp, func(t engine.Token) { c.appendToken(id, t) })
		close(stopFlush)
		c.finishAnswer(id, res, ctx.Err() != nil, err)
		cancel()
	}()
}

// appendToken adds a streamed token to the answer being written.
func (c *Controller) appendToken(id string, t engine.Token) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.chat.cur.ID != id || len(c.chat.cur.Messages) == 0 {
		return
	}
	last := &c.chat.cur.Messages[len(c.chat.cur.Messages)-1]
	if t.Thinking {
		last.Thinking += t.Text
	} else {
		last.Content += t.Text
	}
	c.chat.dirty = true
}

// flushLoop pushes streamed text to the screen in batches until stop is closed.
func (c *Controller) flushLoop(stop chan struct{}) {
	tick := time.NewTicker(streamEvery)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			c.mu.Lock()
			dirty := c.chat.dirty
			c.chat.dirty = false
			c.mu.Unlock()
			if dirty {
				c.notify(topicChat)
			}
		}
	}
}

// finishAnswer records how the answer ended and saves the chat. The chat counts as
// generating until it is saved (and done closes after that): a Wait that returned, or a
// delete allowed, before the save would let the save bring a deleted chat back.
func (c *Controller) finishAnswer(id string, res engine.Result, cancelled bool, err error) {
	c.mu.Lock()
	c.chat.dirty = false
	if c.chat.cur.ID != id {
		c.chat.generating, c.chat.cancel = false, nil
		c.mu.Unlock()
		return
	}
	msgs := c.chat.cur.Messages
	last := &msgs[len(msgs)-1]
	// The streamed text is what the user saw; the result fills in when nothing streamed.
	if last.Content == "" && last.Thinking == "" {
		last.Content, last.Thinking = res.Text, res.Thinking
	}
	last.TokensPerSec = res.Timings.DecodeTokensPerSec()
	last.Stopped = cancelled || res.Stop == engine.StopCancelled
	last.Cut = cutMark(err)
	if n := contextNotice(res); err == nil && n != "" {
		c.chat.err = n
	}
	if err != nil && !cancelled && !errors.Is(err, context.Canceled) {
		c.chat.err = friendly("Writing the answer", err)
		if last.Content == "" && last.Thinking == "" {
			c.chat.cur.Messages = msgs[:len(msgs)-1]
		}
	}
	c.chat.cur.Updated = c.now()
	ch := c.chat.cur
	c.mu.Unlock()
	serr := c.chats.Save(ch)
	c.mu.Lock()
	c.chat.generating, c.chat.cancel = false, nil
	if serr != nil {
		c.chat.err = friendly("Saving the chat", serr)
	}
	c.mu.Unlock()
	c.notify(topicChats)
	c.notify(topicChat)
}

// toEngine turns the saved conversation into the engine's messages.
func toEngine(system string, msgs []store.Message) []engine.Message {
	out := make([]engine.Message, 0, len(msgs)+1)
	if strings.TrimSpace(system) != "" {
		out = append(out, engine.Message{Role: engine.RoleSystem, Content: system})
	}
	for _, m := range msgs {
		out = append(out, engine.Message{Role: engine.Role(m.Role), Content: m.Content, Thinking: m.Thinking})
	}
	return out
}

// titleFrom names a chat after the start of its first message.
func titleFrom(text string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(text), "\n")
	r := []rune(line)
	if len(r) > 40 {
		return strings.TrimSpace(string(r[:40])) + "…"
	}
	return line
}

// tokensPerSecLabel is the line under an answer.
func tokensPerSecLabel(m store.Message) string {
	switch {
	case m.Cut:
		return "cut off: the server's connection dropped"
	case m.TokensPerSec > 0 && m.Stopped:
		return fmt.Sprintf("%.1f tokens/s · stopped", m.TokensPerSec)
	case m.TokensPerSec > 0:
		return fmt.Sprintf("%.1f tokens/s", m.TokensPerSec)
	case m.Stopped:
		return "stopped"
	}
	return ""
}
