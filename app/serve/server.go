// Package serve is Strata's OpenAI-compatible HTTP server: /v1/models, /v1/chat/completions,
// /v1/completions and /health over one engine model, one request at a time. `strata serve`
// runs it on a model of its own; the app runs it on the model it has loaded.
package serve

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// MaxBodyBytes caps a request body.
const MaxBodyBytes = 8 << 20

// Options configure a Server.
type Options struct {
	// APIKey, when set, is required as "Authorization: Bearer KEY" on /v1/ routes.
	APIKey string
	// MaxBodyBytes caps request bodies; 0 = MaxBodyBytes.
	MaxBodyBytes int64
	// Now is the clock for "created"; nil = time.Now.
	Now func() time.Time
}

// Server answers the OpenAI API from the Backend that model returns (nil while no model is
// loaded). Generation is one request at a time: the others wait their turn, and a request
// whose client goes away leaves the queue, or stops its generation, at once.
type Server struct {
	model func() Backend
	opts  Options
	turn  chan struct{} // holds one token while a request generates

	mu     sync.Mutex
	cancel context.CancelFunc // ends the generation that has the turn
}

// New makes a server over model.
func New(model func() Backend, opts Options) *Server {
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = MaxBodyBytes
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Server{model: model, opts: opts, turn: make(chan struct{}, 1)}
}

// ServeHTTP routes a request. Every failure is an OpenAI-style error object.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			slog.Error("serve: handler panic", "path", r.URL.Path, "panic", v)
			writeError(w, http.StatusInternalServerError, "server_error", "internal_error", fmt.Sprintf("internal error: %v", v))
		}
	}()
	path := strings.TrimSuffix(r.URL.Path, "/")
	if path == "/health" {
		if !allow(w, r, http.MethodGet) {
			return
		}
		s.health(w)
		return
	}
	if !strings.HasPrefix(path, "/v1/") {
		writeError(w, http.StatusNotFound, "invalid_request_error", "not_found", fmt.Sprintf("no route %s; this server answers /v1/models, /v1/chat/completions, /v1/completions and /health", r.URL.Path))
		return
	}
	if !s.authorized(r) {
		writeError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "missing or wrong API key: send it as \"Authorization: Bearer KEY\"")
		return
	}
	switch {
	case path == "/v1/models":
		if allow(w, r, http.MethodGet) {
			s.models(w)
		}
	case strings.HasPrefix(path, "/v1/models/"):
		if allow(w, r, http.MethodGet) {
			s.oneModel(w, strings.TrimPrefix(path, "/v1/models/"))
		}
	case path == "/v1/chat/completions":
		if allow(w, r, http.MethodPost) {
			s.chat(w, r)
		}
	case path == "/v1/completions":
		if allow(w, r, http.MethodPost) {
			s.complete(w, r)
		}
	default:
		writeError(w, http.StatusNotFound, "invalid_request_error", "not_found", fmt.Sprintf("no route %s", r.URL.Path))
	}
}

func allow(w http.ResponseWriter, r *http.Request, method string) bool {
	if r.Method == method {
		return true
	}
	w.Header().Set("Allow", method)
	writeError(w, http.StatusMethodNotAllowed, "invalid_request_error", "method_not_allowed", fmt.Sprintf("%s %s: use %s", r.Method, r.URL.Path, method))
	return false
}

func (s *Server) authorized(r *http.Request) bool {
	if s.opts.APIKey == "" {
		return true
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(s.opts.APIKey)) == 1
}

func (s *Server) health(w http.ResponseWriter) {
	if s.model() == nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "no model loaded"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

type modelObject struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
	Context int    `json:"context_length,omitempty"`
}

func (s *Server) modelObject(b Backend) modelObject {
	return modelObject{ID: b.ModelID(), Object: "model", Created: s.opts.Now().Unix(), OwnedBy: "strata", Context: b.ContextLength()}
}

func (s *Server) models(w http.ResponseWriter) {
	list := []modelObject{}
	if b := s.model(); b != nil {
		list = append(list, s.modelObject(b))
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": list})
}

func (s *Server) oneModel(w http.ResponseWriter, id string) {
	b := s.model()
	if b == nil || b.ModelID() != id {
		writeError(w, http.StatusNotFound, "invalid_request_error", "model_not_found", fmt.Sprintf("model %q is not served here", id))
		return
	}
	writeJSON(w, http.StatusOK, s.modelObject(b))
}

// backendFor returns the loaded model if the request names it ("" names whatever is loaded).
func (s *Server) backendFor(w http.ResponseWriter, model string) Backend {
	b := s.model()
	if b == nil {
		writeError(w, http.StatusServiceUnavailable, "server_error", "model_not_loaded", "no model is loaded")
		return nil
	}
	if model != "" && model != b.ModelID() {
		writeError(w, http.StatusNotFound, "invalid_request_error", "model_not_found", fmt.Sprintf("model %q is not served here; this server serves %q", model, b.ModelID()))
		return nil
	}
	return b
}

// decode reads a JSON body into v, refusing unknown fields, trailing data and bodies over
// the cap. The Content-Type is not checked: curl -d sends JSON labelled as a form.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("data after the JSON object")
	}
	if err == nil {
		if _, extra := dec.Token(); extra != io.EOF {
			err = errors.New("data after the JSON object")
		}
	}
	if err == nil {
		return true
	}
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, "invalid_request_error", "request_too_large", fmt.Sprintf("the request body is over %d bytes", s.opts.MaxBodyBytes))
	case errors.Is(err, io.EOF):
		writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_json", "the request body is empty; send a JSON object")
	default:
		writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_json", "the request body is not valid: "+err.Error())
	}
	return false
}

// begin waits for the engine's turn (giving up when the client goes away) and checks that
// b is still the model served: the app may have swapped it while the request waited. The
// context it returns ends when the client leaves or Idle is called; end gives the turn back.
func (s *Server) begin(w http.ResponseWriter, r *http.Request, b Backend) (context.Context, func(), bool) {
	select {
	case s.turn <- struct{}{}:
	case <-r.Context().Done():
		return nil, nil, false
	}
	if s.model() != b {
		<-s.turn
		writeError(w, http.StatusServiceUnavailable, "server_error", "model_changed", "the model was unloaded or replaced while this request waited; send it again")
		return nil, nil, false
	}
	ctx, cancel := context.WithCancel(r.Context())
	s.mu.Lock()
	s.cancel = cancel
	s.mu.Unlock()
	end := func() {
		s.mu.Lock()
		s.cancel = nil
		s.mu.Unlock()
		cancel()
		<-s.turn
	}
	return ctx, end, true
}

// Idle stops the generation in progress, waits for it to end, and keeps every request
// from the engine until release is called: the app closes or swaps its model in between,
// never under a request's feet.
func (s *Server) Idle() (release func()) {
	s.mu.Lock()
	if s.cancel != nil {
		s.cancel()
	}
	s.mu.Unlock()
	s.turn <- struct{}{}
	return func() { <-s.turn }
}

// errInterrupted answers a request whose generation Idle stopped.
var errInterrupted = errors.New("the model was unloaded in the middle of this answer")

type apiError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    string  `json:"code"`
}

func writeError(w http.ResponseWriter, status int, typ, code, msg string) {
	writeJSON(w, status, map[string]apiError{"error": {Message: msg, Type: typ, Code: code}})
}

func badRequest(w http.ResponseWriter, param, msg string) {
	p := param
	writeJSON(w, http.StatusBadRequest, map[string]apiError{"error": {Message: msg, Type: "invalid_request_error", Param: &p, Code: "invalid_value"}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if err := json.NewEncoder(w).Encode(v); err != nil {
		slog.Debug("serve: write", "err", err)
	}
}

func newID(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// CheckHost refuses to listen beyond this machine without a key: a host that is not a
// loopback address or "localhost" needs one.
func CheckHost(host, apiKey string) error {
	if isLoopback(host) || apiKey != "" {
		return nil
	}
	return fmt.Errorf("serve: host %q is reachable from other machines; set an API key (--api-key) to serve there", host)
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// Listen checks the host against the key and opens the listener.
func Listen(host string, port int, apiKey string) (net.Listener, error) {
	if err := CheckHost(host, apiKey); err != nil {
		return nil, err
	}
	if port < 0 || port > 65535 {
		return nil, fmt.Errorf("serve: port %d is out of range", port)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(strings.Trim(host, "[]"), strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("serve: listen: %w", err)
	}
	return ln, nil
}

// HTTPServer wraps s with the timeouts a server facing slow or idle clients needs (no
// write timeout: answers stream for as long as the model writes).
func HTTPServer(s *Server) *http.Server {
	return &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       2 * time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
}

// URL is the base URL clients use for a listener: http://host:port/v1.
func URL(ln net.Listener) string {
	return "http://" + ln.Addr().String() + "/v1"
}
