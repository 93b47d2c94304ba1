package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"strata/app/serve"
	"strata/engine"
)

// runServe loads a model and answers the OpenAI API on it until the context ends (Ctrl-C).
func runServe(ctx context.Context, args []string, io IO) error {
	fs := newFlags("serve", io)
	cfg := engine.DefaultConfig()
	modelPath := fs.String("m", "", "model GGUF file")
	host := fs.String("host", "127.0.0.1", "address to listen on (a non-loopback one needs --api-key)")
	port := fs.Int("port", 8080, "TCP port (0 = any free port)")
	apiKey := fs.String("api-key", "", "key clients must send as \"Authorization: Bearer KEY\" (default $STRATA_API_KEY)")
	contextFull := fs.String("context-full", "stop", "a conversation longer than the context: stop (answer 400 context_length_exceeded) or drop-oldest (leave out the oldest turns, keeping the system prompt)")
	addEngineFlags(fs, &cfg)
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	if *modelPath == "" {
		return usagef("-m MODEL is required")
	}
	policy, err := engine.ParseContextPolicy(*contextFull)
	if err != nil {
		return usagef("--context-full: %v", err)
	}
	if *apiKey == "" {
		*apiKey = os.Getenv("STRATA_API_KEY")
	}
	if err := serve.CheckHost(*host, *apiKey); err != nil {
		return usagef("%v", err)
	}
	if *port < 0 || *port > 65535 {
		return usagef("--port %d is out of range", *port)
	}
	fmt.Fprintf(io.Err, "loading %s ...\n", *modelPath)
	m, err := engine.Open(ctx, *modelPath, cfg, nil)
	if err != nil {
		return err
	}
	defer m.Close()
	if w := m.TemplateWarning(); w != "" {
		fmt.Fprintf(io.Err, "note: %s\n", w)
	}
	ln, err := serve.Listen(*host, *port, *apiKey)
	if err != nil {
		return err
	}
	backend := serve.NewLocal(m, policy)
	srv := serve.HTTPServer(serve.New(func() serve.Backend { return backend }, serve.Options{APIKey: *apiKey}))
	fmt.Fprintf(io.Err, "serving %s (%s) at %s\n", backend.ModelID(), m.Backend(), serve.URL(ln))
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shut); err != nil {
		srv.Close()
	}
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	fmt.Fprintln(io.Err, "server stopped")
	return nil
}
