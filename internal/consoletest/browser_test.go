package consoletest

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// screenshots is where the test writes the images README shows.
const screenshots = "../../docs/screenshots"

// browser is one headless chromium tab and the console messages it saw.
type browser struct {
	t   *testing.T
	ctx context.Context
	mu  sync.Mutex
	// allowed lists URL parts, paths lists URL paths, whose failed requests
	// are expected (a deliberate 4xx, a route this server lacks): the
	// browser logs them as network errors, which the page handles itself.
	allowed, paths []string
	bad            []string
	// shots says whether screenshot saves its images.
	shots bool
}

// chromiumPath returns chromium's path. Without it the test is skipped,
// unless CI=true.
func chromiumPath(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not on PATH and CI=true: the console's browser test must run in CI (bash deploy/local/services.sh tools installs it)")
	}
	t.Skip("chromium is not on PATH: skipping the console's browser test (bash deploy/local/services.sh tools installs it; with CI=true this is a failure)")
	return ""
}

func newBrowser(t *testing.T) *browser {
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)), chromedp.NoSandbox, chromedp.WindowSize(1360, 1000),
		chromedp.Flag("lang", "en-US"),
		// Chromium leaves its singleton directory (org.chromium.Chromium.*)
		// in TMPDIR when it is stopped; the test's own directory takes it.
		chromedp.Env("TMPDIR="+t.TempDir()))
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(alloc)
	b := &browser{t: t, ctx: ctx}
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	msgs := chromedp.Console(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range msgs {
			if err != nil {
				return
			}
			b.record(m)
		}
	}()
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
		<-done
		for _, m := range b.bad {
			t.Errorf("browser console: %s", m)
		}
	})
	return b
}

// record fails the test (at its end) on every console API call, exception
// and browser log warning or error, except a network error for an allowed
// URL.
func (b *browser) record(m chromedp.ConsoleMessage) {
	b.mu.Lock()
	defer b.mu.Unlock()
	line := m.String() + " (" + m.URL + ")"
	switch {
	case m.Source == "network":
		u, _ := url.Parse(m.URL)
		for _, a := range b.allowed {
			if strings.Contains(m.URL, a) {
				b.t.Logf("expected network error: %s", line)
				return
			}
		}
		for _, p := range b.paths {
			if u != nil && u.Path == p {
				b.t.Logf("expected network error: %s", line)
				return
			}
		}
	case m.Source != "" && m.Type != chromedp.ConsoleWarning && m.Type != chromedp.ConsoleError:
		return // browser log entries below warning
	}
	b.bad = append(b.bad, line)
}

// allow expects failed requests to URLs holding urlPart.
func (b *browser) allow(urlPart string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.allowed = append(b.allowed, urlPart)
}

// allowPath expects failed requests to exactly path (any query).
func (b *browser) allowPath(path string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.paths = append(b.paths, path)
}

// do runs actions, failing the test with what on error.
func (b *browser) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// eval returns the value of a JavaScript expression.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// text is the text of the first element matching the CSS selector sel, ""
// when there is none.
func (b *browser) text(sel string) string {
	b.t.Helper()
	q, _ := json.Marshal(sel)
	return eval[string](b, `(() => { const e = document.querySelector(`+string(q)+`); return e ? e.textContent : ""; })()`)
}

// waitText waits until the text of sel satisfies ok.
func (b *browser) waitText(sel, what string, timeout time.Duration, ok func(string) bool) string {
	b.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		s := b.text(sel)
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("timed out after %v waiting for %s (%s is %q)", timeout, what, sel, s)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// press focuses sel and presses Enter, as a keyboard user does.
func (b *browser) press(what, sel string) {
	b.t.Helper()
	b.do(what, chromedp.Focus(chromedp.CSS(sel)), chromedp.KeyEvent(kb.Enter))
}

// screenshot saves the whole page, or the element sel when sel is not "",
// as docs/screenshots/name (when b.shots).
func (b *browser) screenshot(name, sel string) {
	b.t.Helper()
	if !b.shots {
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	var img []byte
	var err error
	if sel == "" {
		img, err = chromedp.Run(ctx, chromedp.FullScreenshot(100))
	} else {
		img, err = chromedp.Run(ctx, chromedp.Screenshot(chromedp.CSS(sel)))
	}
	if err == nil {
		err = errors.Join(os.MkdirAll(screenshots, 0o755), os.WriteFile(filepath.Join(screenshots, name), img, 0o644))
	}
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	b.t.Logf("saved %s", filepath.Join("docs/screenshots", name))
}
