// Package browsertest loads a local HTML file in a real, headless Chromium
// and lets a test look at it: count elements, evaluate JavaScript, read the
// console's errors and save a screenshot.
//
// The browser is Debian's `chromium` package (scripts/deps.sh installs it),
// driven over the Chrome DevTools Protocol by github.com/chromedp/chromedp.
// Each Open starts a fresh browser process with its own empty profile (a
// --user-data-dir under the test's temporary directory) and these flags:
//
//	--headless --no-sandbox --disable-gpu --disable-quic --no-first-run
//	--disable-background-networking --disable-component-update --disable-sync
//	--disable-dev-shm-usage --no-default-browser-check
//
// so nothing it does leaves the machine or outlives the test: the page is
// read from disk through a file:// URL, and the browser is killed at the
// test's cleanup.
//
// # Skipping
//
// Open skips the test when no Chromium binary is found ($MPTX_CHROMIUM, or
// chromium, chromium-browser, google-chrome on $PATH), and fails it instead
// when $CI is set: CI installs the browser, so a missing one there is a
// broken setup, not a reason to pass.
//
// # Usage
//
//	p := browsertest.Open(t, "out/report.html")
//	if n := p.Count("table"); n == 0 {
//		t.Errorf("no tables")
//	}
//	if errs := p.Errors(); len(errs) > 0 {
//		t.Errorf("console errors: %q", errs)
//	}
//	t.Logf("screenshot: %s", p.Screenshot("report.png"))
//
// A Page is used by one goroutine (the test's); its methods fail the test
// (t.Fatal) when the browser does not answer. Every browser call is bounded
// by Timeout, so a wedged browser fails the test instead of hanging it.
package browsertest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// Timeout bounds the browser's start and page load, and then each call
// on a Page. It is a guard against a hung browser, not a performance
// assertion: on a loaded two-core machine Chromium takes a few seconds to
// start.
const Timeout = 2 * time.Minute

// Chromium returns the path of the browser binary Open would start: the
// $MPTX_CHROMIUM environment variable when set, else the first of
// chromium, chromium-browser and google-chrome found on $PATH.
func Chromium() (string, bool) {
	if p := os.Getenv("MPTX_CHROMIUM"); p != "" {
		if _, err := os.Stat(p); err == nil {
			return p, true
		}
		return "", false
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, true
		}
	}
	return "", false
}

// Page is a file loaded in a headless browser.
type Page struct {
	tb  testing.TB
	ctx context.Context

	mu   sync.Mutex
	msgs []chromedp.ConsoleMessage
}

// Open starts a headless Chromium with a viewport of width × height CSS
// pixels (0, 0 means 1280 × 900; the page's media queries see that width), loads file (a path on disk) as a
// file:// URL and waits for its load event. The browser is stopped when the
// test ends. See the package doc for when Open skips.
func Open(tb testing.TB, file string, width, height int) *Page {
	tb.Helper()
	bin, ok := Chromium()
	if !ok {
		msg := "browsertest: no Chromium found ($MPTX_CHROMIUM, or chromium on $PATH); install Debian's chromium package (scripts/deps.sh does)"
		if os.Getenv("CI") != "" {
			tb.Fatal(msg + "; CI must run this test")
		}
		tb.Skip(msg)
	}
	if width <= 0 || height <= 0 {
		width, height = 1280, 900
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		tb.Fatalf("browsertest: %v", err)
	}
	if _, err := os.Stat(abs); err != nil {
		tb.Fatalf("browsertest: %v", err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("force-color-profile", "srgb"),
		chromedp.WindowSize(width, height),
		chromedp.UserDataDir(tb.TempDir()),
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	tb.Cleanup(func() {
		cancel()
		acancel()
	})
	p := &Page{tb: tb, ctx: ctx}

	// Start the browser, then subscribe to the console before loading, so
	// no message is lost. The browser lives as long as the context of the
	// first call, so its start is bounded by a timer, not a derived context.
	guard := time.AfterFunc(Timeout, cancel)
	viewport := chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, emulation.SetDeviceMetricsOverride,
			emulation.SetDeviceMetricsOverrideParams{Width: int64(width), Height: int64(height), DeviceScaleFactor: 1})
		return err
	})
	if err := chromedp.Do(ctx, viewport); err != nil {
		tb.Fatalf("browsertest: starting %s: %v", bin, err)
	}
	guard.Stop()
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			p.mu.Lock()
			p.msgs = append(p.msgs, m)
			p.mu.Unlock()
		}
	}()
	u := (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String()
	p.call("loading "+u, func(ctx context.Context) error { return chromedp.Do(ctx, chromedp.Navigate(u)) })
	return p
}

// call runs f with a context bounded by Timeout.
func (p *Page) call(what string, f func(ctx context.Context) error) {
	p.tb.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, Timeout)
	defer cancel()
	if err := f(ctx); err != nil {
		p.tb.Fatalf("browsertest: %s: %v", what, err)
	}
}

// Eval evaluates the JavaScript expression js in the page and decodes its
// value (as JSON) into out, which may be nil.
func (p *Page) Eval(js string, out any) {
	p.tb.Helper()
	var s string
	p.call("evaluating "+js, func(ctx context.Context) (err error) {
		s, err = chromedp.Run(ctx, chromedp.Evaluate[string]("JSON.stringify(("+js+")) ?? 'null'"))
		return err
	})
	if out != nil {
		if err := json.Unmarshal([]byte(s), out); err != nil {
			p.tb.Fatalf("browsertest: decoding the value of %s (%.200s): %v", js, s, err)
		}
	}
}

// Count returns the number of elements matching the CSS selector.
func (p *Page) Count(selector string) int {
	p.tb.Helper()
	var n int
	sel, _ := json.Marshal(selector)
	p.Eval("document.querySelectorAll("+string(sel)+").length", &n)
	return n
}

// Errors returns the console's error messages so far, one line each:
// console.error calls, uncaught exceptions and unhandled rejections, and
// the browser's own error log entries (a resource that failed to load, a
// blocked request).
func (p *Page) Errors() []string {
	p.tb.Helper()
	// Let the events of what just ran arrive: one round trip through the
	// page orders us after them.
	p.Eval("0", nil)
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, m := range p.msgs {
		if m.Type == chromedp.ConsoleError || m.IsException() {
			where := ""
			if m.URL != "" {
				where = fmt.Sprintf(" (%s:%d)", m.URL, m.Line+1)
			}
			out = append(out, strings.TrimSpace(m.String())+where)
		}
	}
	return out
}

// Screenshot saves a PNG of the whole page (the viewport's width, and the
// page's full height when it is longer than the viewport) as name in the test's temporary directory and returns its path.
func (p *Page) Screenshot(name string) string {
	p.tb.Helper()
	var png []byte
	p.call("screenshot", func(ctx context.Context) (err error) {
		png, err = chromedp.Run(ctx, chromedp.FullScreenshot(100))
		return err
	})
	path := filepath.Join(p.tb.TempDir(), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		p.tb.Fatalf("browsertest: %v", err)
	}
	return path
}

// Context returns the page's chromedp context, for actions this package
// does not wrap (chromedp.Run(ctx, chromedp.Click(...))). Bound each use
// with a timeout.
func (p *Page) Context() context.Context { return p.ctx }
