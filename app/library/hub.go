// Package library gets models onto the PC: the built-in catalogue of MoE GGUFs that suit a
// 32 GB PC (catalogue.json, embedded), the Hugging Face Hub client (this file: the Hub's
// public HTTP API, honouring HF_ENDPOINT and HF_TOKEN), resumable checked downloads
// (download.go) and the models folder (models.go). The GUI's library screen
// (app/gui/library.go) and `strata pull` (app/cli/pull.go) are its two callers; the
// engine knows nothing of it.
package library

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"time"

	"strata/engine/gguf"
)

// DefaultEndpoint is the Hub's address when HF_ENDPOINT is not set.
const DefaultEndpoint = "https://huggingface.co"

// Client talks to the Hugging Face Hub (or a mirror of its API).
type Client struct {
	Endpoint string       // no trailing slash
	Token    string       // an access token for gated and private repositories; "" for none
	HTTP     *http.Client // nil: http.DefaultClient; NewClient sets one with header timeouts
	// FreeSpace says how many bytes may still be written in a folder; nil:
	// platform.FreeSpace. Tests put a stand-in here for a full disk.
	FreeSpace func(dir string) (int64, error)
	// ReportEvery is the least time between two progress reports of a download; 0: 250 ms.
	ReportEvery time.Duration
}

// NewClient is a client for HF_ENDPOINT (default huggingface.co) with HF_TOKEN, the
// variables the Hub's own tools read.
func NewClient() *Client {
	ep := strings.TrimRight(os.Getenv("HF_ENDPOINT"), "/")
	if ep == "" {
		ep = DefaultEndpoint
	}
	// No overall timeout (a download takes hours); a server that stops answering is caught
	// by the header timeout, a stalled body by the caller's cancel (Pause).
	hc := &http.Client{Transport: &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		TLSHandshakeTimeout:   30 * time.Second,
		ResponseHeaderTimeout: 60 * time.Second,
		IdleConnTimeout:       90 * time.Second,
	}}
	return &Client{Endpoint: ep, Token: strings.TrimSpace(os.Getenv("HF_TOKEN")), HTTP: hc}
}

func (c *Client) http() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}

// RepoFile is one file of a repository as the Hub lists it.
type RepoFile struct {
	Path   string `json:"path"`             // inside the repository
	Size   int64  `json:"size"`             // bytes
	SHA256 string `json:"sha256,omitempty"` // hex, from the file's LFS pointer ("" when not in LFS)
}

// Repo is a search result.
type Repo struct {
	ID        string    `json:"id"` // owner/name
	Downloads int64     `json:"downloads"`
	Likes     int64     `json:"likes"`
	Modified  time.Time `json:"lastModified"`
	Gated     bool      `json:"-"`
}

// HubError is an answer of the Hub that means the request cannot succeed as asked, said in
// plain words.
type HubError struct {
	Status int
	Repo   string
	File   string // "" for the repository itself
	Msg    string
}

func (e *HubError) Error() string { return e.Msg }

// ErrGated and ErrNotFound are what a HubError Is, for callers that choose by kind.
var (
	ErrGated    = errors.New("gated or private repository")
	ErrNotFound = errors.New("not found on the Hub")
)

func (e *HubError) Is(target error) bool {
	switch target {
	case ErrGated:
		return e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden
	case ErrNotFound:
		return e.Status == http.StatusNotFound
	}
	return false
}

// ValidRepo checks an owner/name repository id.
func ValidRepo(repo string) error {
	owner, name, ok := strings.Cut(repo, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") || strings.ContainsAny(repo, " \t\n?#%\\") || strings.Contains(repo, "..") {
		return fmt.Errorf("%q is not a Hugging Face repository name: want owner/name, e.g. unsloth/Qwen3-30B-A3B-Instruct-2507-GGUF", repo)
	}
	return nil
}

// hubError explains a failed answer about repo (and file) in plain words.
func (c *Client) hubError(resp *http.Response, repo, file string) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	what := "the repository " + repo
	if file != "" {
		what = file + " in " + repo
	}
	code := resp.Header.Get("X-Error-Code")
	e := &HubError{Status: resp.StatusCode, Repo: repo, File: file}
	switch {
	case code == "GatedRepo" || (resp.StatusCode == http.StatusForbidden && c.Token != ""):
		e.Status = http.StatusForbidden
		e.Msg = fmt.Sprintf("%s is gated: its authors want you to accept their terms first. Open %s/%s in a browser, accept them while signed in, and make sure HF_TOKEN is a token of that account.", what, c.Endpoint, repo)
	case code == "RepoNotFound":
		e.Status = http.StatusNotFound
		e.Msg = fmt.Sprintf("the repository %s was not found on Hugging Face: check the name (owner/name). If it is private, HF_TOKEN must be an access token that can read it.", repo)
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		if c.Token == "" {
			e.Msg = fmt.Sprintf("%s needs you to sign in: it is gated or private. Accept its terms at %s/%s, create an access token in your Hugging Face settings, and set HF_TOKEN to it.", what, c.Endpoint, repo)
		} else {
			e.Msg = fmt.Sprintf("%s refused the access token in HF_TOKEN: the token may be wrong or expired, or the account has not accepted the repository's terms at %s/%s.", what, c.Endpoint, repo)
		}
	case resp.StatusCode == http.StatusNotFound:
		if code == "EntryNotFound" || (file != "" && code != "RepoNotFound") {
			e.Msg = fmt.Sprintf("%s does not exist: the repository has no file by that name (its files are listed with `strata pull %s`).", what, repo)
		} else {
			e.Msg = fmt.Sprintf("%s was not found on Hugging Face: check the name (owner/name).", what)
		}
	default:
		msg := strings.TrimSpace(string(body))
		if len(msg) > 200 {
			msg = msg[:200] + "..."
		}
		e.Msg = fmt.Sprintf("Hugging Face answered %s for %s: %s", resp.Status, what, msg)
	}
	return e
}

// get sends an authenticated GET and returns the response when its status is 2xx.
func (c *Client) get(ctx context.Context, u string, header http.Header, repo, file string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("library: %w", err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	req.Header.Set("User-Agent", "strata")
	resp, err := c.http().Do(req)
	if err != nil {
		return nil, fmt.Errorf("library: cannot reach %s: %w", c.Endpoint, err)
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		return nil, c.hubError(resp, repo, file)
	}
	return resp, nil
}

// getJSON decodes a JSON answer into v and returns the next page's address from the Link
// header ("" when it is the last page).
func (c *Client) getJSON(ctx context.Context, u, repo string, v any) (string, error) {
	resp, err := c.get(ctx, u, nil, repo, "")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(v); err != nil {
		return "", fmt.Errorf("library: %s: the Hub's answer is not the JSON expected: %w", u, err)
	}
	return nextLink(resp.Header.Get("Link"), resp.Request.URL), nil
}

// maxPages bounds how many pages of a listing are followed.
const maxPages = 100

// nextLink finds rel="next" in a Link header (`<URL>; rel="next"`), resolved against base.
func nextLink(h string, base *url.URL) string {
	for _, part := range strings.Split(h, ",") {
		target, params, ok := strings.Cut(strings.TrimSpace(part), ";")
		if !ok || !strings.Contains(strings.ReplaceAll(params, " ", ""), `rel="next"`) {
			continue
		}
		target = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(target), "<"), ">")
		if u, err := base.Parse(target); err == nil {
			return u.String()
		}
	}
	return ""
}

// escapePath escapes each element of a path inside a repository.
func escapePath(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		parts[i] = url.PathEscape(s)
	}
	return strings.Join(parts, "/")
}

// Files lists every file of repo's main branch with its size and, for files in LFS, the
// SHA-256 the Hub publishes (GET /api/models/REPO/tree/main?recursive=true).
func (c *Client) Files(ctx context.Context, repo string) ([]RepoFile, error) {
	if err := ValidRepo(repo); err != nil {
		return nil, err
	}
	type entry struct {
		Type string `json:"type"`
		Path string `json:"path"`
		Size int64  `json:"size"`
		LFS  *struct {
			Oid  string `json:"oid"`
			Size int64  `json:"size"`
		} `json:"lfs"`
	}
	var entries []entry
	// The listing comes in pages (a Link header names the next).
	u := c.Endpoint + "/api/models/" + escapePath(repo) + "/tree/main?recursive=true"
	for page := 0; u != ""; page++ {
		if page == maxPages {
			return nil, fmt.Errorf("library: %s lists more than %d pages of files", repo, maxPages)
		}
		var batch []entry
		next, err := c.getJSON(ctx, u, repo, &batch)
		if err != nil {
			return nil, err
		}
		entries = append(entries, batch...)
		u = next
	}
	var out []RepoFile
	for _, e := range entries {
		if e.Type != "file" {
			continue
		}
		f := RepoFile{Path: e.Path, Size: e.Size}
		if e.LFS != nil {
			f.SHA256, f.Size = strings.ToLower(e.LFS.Oid), e.LFS.Size
		}
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// Search finds GGUF model repositories whose name contains query, most downloaded first
// (GET /api/models?search=Q&filter=gguf).
func (c *Client) Search(ctx context.Context, query string, limit int) ([]Repo, error) {
	query = strings.TrimSpace(query)
	if query == "" {
		return nil, errors.New("library: search: type part of a model's name")
	}
	if limit <= 0 || limit > 100 {
		limit = 30
	}
	q := url.Values{"search": {query}, "filter": {"gguf"}, "sort": {"downloads"}, "direction": {"-1"}, "limit": {fmt.Sprint(limit)}}
	var raw []struct {
		Repo
		Gated any `json:"gated"` // false, or "auto"/"manual"
	}
	if _, err := c.getJSON(ctx, c.Endpoint+"/api/models?"+q.Encode(), "", &raw); err != nil {
		return nil, err
	}
	out := make([]Repo, len(raw))
	for i, r := range raw {
		out[i] = r.Repo
		switch g := r.Gated.(type) {
		case bool:
			out[i].Gated = g
		case string:
			out[i].Gated = g != "" && g != "false"
		}
	}
	return out, nil
}

// resolveURL is where a file of repo's main branch downloads from.
func (c *Client) resolveURL(repo, file string) string {
	return c.Endpoint + "/" + escapePath(repo) + "/resolve/main/" + escapePath(file)
}

// GGUFModel is one model of a repository: a single .gguf file, or the parts of a split one.
type GGUFModel struct {
	Name  string     // the file's name, or the first part's for a split model
	Parts []RepoFile // in order
}

// Size is the bytes of every part.
func (m GGUFModel) Size() int64 {
	var n int64
	for _, p := range m.Parts {
		n += p.Size
	}
	return n
}

// GGUFModels groups a repository's .gguf files into models: split parts
// (NAME-00001-of-0000N.gguf) join their first part; a set with a part missing is left out.
func GGUFModels(files []RepoFile) []GGUFModel {
	sets := map[string][]RepoFile{}
	var order []string
	var out []GGUFModel
	for _, f := range files {
		if !strings.HasSuffix(strings.ToLower(f.Path), ".gguf") {
			continue
		}
		if prefix, _, n, ok := gguf.ParseSplitPath(f.Path); ok && n > 1 {
			key := fmt.Sprintf("%s|%d", prefix, n)
			if _, seen := sets[key]; !seen {
				order = append(order, key)
			}
			sets[key] = append(sets[key], f)
			continue
		}
		out = append(out, GGUFModel{Name: f.Path, Parts: []RepoFile{f}})
	}
	for _, key := range order {
		parts := sets[key]
		sort.Slice(parts, func(i, j int) bool { return parts[i].Path < parts[j].Path })
		_, i, n, _ := gguf.ParseSplitPath(parts[0].Path)
		if i != 0 || len(parts) != n {
			continue
		}
		out = append(out, GGUFModel{Name: parts[0].Path, Parts: parts})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
