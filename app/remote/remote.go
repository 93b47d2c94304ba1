// Package remote is a chat model on another machine: any server that speaks the OpenAI
// chat API (strata serve, llama.cpp's llama-server, vLLM, SGLang). It answers the same
// Chat call the app makes of its own engine, so a model too big for the PC runs elsewhere
// while the app stays the same. Failures come back as *Error in plain words.
package remote

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"
)

// Kinds of failure, for errors.Is.
var (
	ErrUnreachable = errors.New("the server cannot be reached")
	ErrKey         = errors.New("the server refused the API key")
	ErrModelGone   = errors.New("the server does not serve this model")
	ErrStreamCut   = errors.New("the connection dropped in the middle of the answer")
	ErrServer      = errors.New("the server reported an error")
)

// Error is a failed call to the server: Kind is one of the Err values above, Detail what
// the server or the network said.
type Error struct {
	Kind   error
	URL    string
	Detail string
}

func (e *Error) Error() string {
	msg := e.Kind.Error()
	switch e.Kind {
	case ErrUnreachable:
		msg = fmt.Sprintf("cannot reach the server at %s: is it running, and is the address right?", e.URL)
	case ErrKey:
		msg = fmt.Sprintf("the server at %s refused the API key: check the key in \"Connect to a server\"", e.URL)
	case ErrStreamCut:
		msg = "the connection to the server dropped in the middle of the answer; what arrived is kept"
	}
	if e.Detail != "" {
		msg += " (" + e.Detail + ")"
	}
	return msg
}

// Unwrap lets errors.Is match the kind.
func (e *Error) Unwrap() error { return e.Kind }

// Client talks to one server.
type Client struct {
	base string // ends in /v1, no trailing slash
	key  string
	http *http.Client
}

// NewClient checks the base URL ("http://host:8080" or ".../v1") and makes a client.
func NewClient(baseURL, apiKey string) (*Client, error) {
	u, err := url.Parse(strings.TrimSpace(baseURL))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("remote: %q is not a server address: write it as http://host:port", baseURL)
	}
	base := strings.TrimRight(u.String(), "/")
	if !strings.HasSuffix(base, "/v1") {
		base += "/v1"
	}
	// No overall timeout: an answer streams for as long as the model writes. Connecting and
	// the first response byte have their own limits.
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 10 * time.Minute, // a long prompt on a busy server
		IdleConnTimeout:       90 * time.Second,
	}
	return &Client{base: base, key: strings.TrimSpace(apiKey), http: &http.Client{Transport: tr}}, nil
}

// BaseURL is the server's API root (".../v1").
func (c *Client) BaseURL() string { return c.base }

func (c *Client) do(ctx context.Context, method, path string, body any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("remote: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, fmt.Errorf("remote: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &Error{Kind: ErrUnreachable, URL: c.base, Detail: errDetail(err)}
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		return nil, c.statusError(resp)
	}
	return resp, nil
}

// errDetail is the innermost message of a network error ("connection refused").
func errDetail(err error) string {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err.Error()
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}

func (c *Client) statusError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	detail := serverMessage(b)
	if detail == "" {
		detail = resp.Status
	}
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return &Error{Kind: ErrKey, URL: c.base, Detail: detail}
	case resp.StatusCode == http.StatusNotFound && strings.Contains(strings.ToLower(string(b)), "model"):
		return &Error{Kind: ErrModelGone, URL: c.base, Detail: detail}
	case resp.StatusCode == http.StatusNotFound:
		return &Error{Kind: ErrServer, URL: c.base, Detail: fmt.Sprintf("%s: is this the API's address? (%s)", resp.Status, detail)}
	}
	return &Error{Kind: ErrServer, URL: c.base, Detail: fmt.Sprintf("%d: %s", resp.StatusCode, detail)}
}

// serverMessage reads an OpenAI-style {"error": {"message": ...}} body (or {"error": "..."}).
func serverMessage(b []byte) string {
	var body struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(b, &body) != nil || len(body.Error) == 0 {
		return strings.TrimSpace(string(b[:min(len(b), 200)]))
	}
	var obj struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(body.Error, &obj) == nil && obj.Message != "" {
		return obj.Message
	}
	var s string
	if json.Unmarshal(body.Error, &s) == nil {
		return s
	}
	return string(body.Error)
}

// Models lists the ids the server serves (GET /v1/models), sorted.
func (c *Client) Models(ctx context.Context) ([]string, error) {
	resp, err := c.do(ctx, http.MethodGet, "/models", nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&list); err != nil {
		return nil, &Error{Kind: ErrServer, URL: c.base, Detail: "the model list is not OpenAI JSON: " + err.Error()}
	}
	ids := make([]string, 0, len(list.Data))
	for _, m := range list.Data {
		ids = append(ids, m.ID)
	}
	sort.Strings(ids)
	return ids, nil
}
