//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image/png"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

// browserAccept is the Accept header Chromium sends for a page.
const browserAccept = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"

// wakePhases in the order a wake goes through them.
var wakePhases = []elastiv1alpha1.WakePhase{
	elastiv1alpha1.WakePhaseScaling, elastiv1alpha1.WakePhaseScheduling, elastiv1alpha1.WakePhasePullingImage,
	elastiv1alpha1.WakePhaseStarting, elastiv1alpha1.WakePhaseReady,
}

// artifactsDir is where tests write files for people to look at:
// $ELASTI_E2E_ARTIFACTS, or bin/e2e-artifacts in the repository.
func artifactsDir(t testing.TB) string {
	dir := os.Getenv("ELASTI_E2E_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "..", "bin", "e2e-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// loopbackForward listens on 127.0.0.1 and relays every connection to addr
// inside the cluster, so that a program that cannot use the test's dialer
// (a browser) reaches a Service. It stops with the test.
func (e *Env) loopbackForward(t testing.TB, addr string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var conns sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		l.Close()
		conns.Wait()
	})
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns.Go(func() {
				defer c.Close()
				up, err := e.Dialer.DialContext(ctx, "tcp", addr)
				if err != nil {
					return
				}
				defer up.Close()
				stop := context.AfterFunc(ctx, func() { c.Close(); up.Close() })
				defer stop()
				done := make(chan struct{})
				go func() {
					_, _ = io.Copy(up, c)
					if tc, ok := up.(interface{ CloseWrite() error }); ok {
						_ = tc.CloseWrite()
					}
					close(done)
				}()
				_, _ = io.Copy(c, up)
				<-done
			})
		}
	}()
	return l.Addr().String()
}

// TestWakingPage: a sleeping app that takes 20 s to boot (long enough for
// Chromium, started before the wake, to load the page on a busy machine),
// with spec.proxy.wakingPage.
//   - A browser-like client polling the Service from zero sees the waking
//     page (503, Refresh) with phases that begin with Scaling, only move
//     forward and include Starting, then the app's own answer.
//   - Headless Chromium opens the page while the target wakes, a
//     screenshot is written, and without any help from the test the page
//     reloads itself into the app's answer.
//   - An API client's request sent meanwhile is held, not given the page,
//     and its answer carries Elasti-Cold-Start.
//   - Serving again, the status shows no wake in progress.
func TestWakingPage(t *testing.T) {
	t.Parallel()
	e := Get(t)
	ns, ip := demoApp(t, e, withEnv("STARTUP_DELAY", "20s"))
	es := e.ElastiServiceFor(ns, "demoapp", IdleQuery)
	es.Spec.Proxy = &elastiv1alpha1.ProxySpec{WakingPage: &elastiv1alpha1.WakingPage{RefreshSeconds: 1}}
	e.Create(t, es)
	e.WaitAsleep(t, ns, "demoapp", 2*time.Minute)
	// Chromium starts before the wake: on a machine busy with other tests
	// its start can take longer than the app's boot, and it must find the
	// waking page.
	browser, navigations := startChromium(t)
	e.SetQuery(t, ns, "demoapp", BusyQuery)
	url := httpURL(ip, DemoHTTPPort)
	dir := artifactsDir(t)

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	// A browser-like poller first: its first page load is the wake, so it
	// sees the phases from the start.
	var polled []string
	var pollErr error
	var polling sync.WaitGroup
	firstPage := make(chan struct{})
	var answered sync.Once
	polling.Go(func() {
		c := e.keepAliveClient(30 * time.Second)
		pollErr = Poll(ctx, 3*time.Minute, 200*time.Millisecond, func(ctx context.Context) error {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			req.Header.Set("Accept", browserAccept)
			resp, err := c.Do(req)
			if err != nil {
				return err
			}
			answered.Do(func() { close(firstPage) })
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			switch {
			case resp.StatusCode == http.StatusOK && strings.HasPrefix(string(body), "hello from demoapp-"):
				polled = append(polled, "answer")
				return nil
			case resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Refresh") == "1":
				if p := resp.Header.Get("Elasti-Waking-Page"); len(polled) == 0 || polled[len(polled)-1] != p {
					polled = append(polled, p)
				}
				return errors.New("waking")
			default:
				return fmt.Errorf("unexpected answer %s, headers %v: %.200s", resp.Status, resp.Header, body)
			}
		})
	})
	pageURL := "http://" + e.loopbackForward(t, net.JoinHostPort(ip, fmt.Sprint(DemoHTTPPort))) + "/"
	// Then Chromium, while the target wakes, once the poller has its first
	// page.
	select {
	case <-firstPage:
	case <-ctx.Done():
		t.Fatalf("the browser-like poller got no page: %v", ctx.Err())
	}
	browserOpensWakingPage(t, browser, pageURL, filepath.Join(dir, "waking-page.png"))

	// And an API client, which must be held, not given the page.
	apiReq, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	apiReq.Header.Set("Accept", "application/json")
	resp, err := e.keepAliveClient(3 * time.Minute).Do(apiReq)
	if err != nil {
		t.Fatalf("API client at zero: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(string(body), "hello from demoapp-") {
		t.Errorf("API client at zero got %s %q; want to be held and get the app's answer", resp.Status, body)
	}
	if cs := resp.Header.Get("Elasti-Cold-Start"); cs == "" {
		t.Errorf("the held API request's answer has no Elasti-Cold-Start header: %v", resp.Header)
	} else if d, err := time.ParseDuration(cs); err != nil || d < time.Second {
		t.Errorf("Elasti-Cold-Start: %q; want the time held, at least a second (the app boots in 20 s)", cs)
	} else {
		t.Logf("API client held %s", d)
	}
	polling.Wait()
	if pollErr != nil {
		t.Errorf("browser-like poller never got the app's answer: %v (saw %v)", pollErr, polled)
	}
	// Phases only move forward, include Starting (20 s of boot), and end
	// in the app's answer.
	t.Logf("the poller saw %v", polled)
	if len(polled) == 0 || polled[len(polled)-1] != "answer" {
		t.Errorf("poller's sequence %v does not end in the app's answer", polled)
	} else {
		last := -1
		for _, p := range polled[:len(polled)-1] {
			i := slices.Index(wakePhases, elastiv1alpha1.WakePhase(p))
			if i < 0 || i < last {
				t.Errorf("phases %v are not in the order %v", polled, wakePhases)
				break
			}
			last = i
		}
		if polled[0] != string(elastiv1alpha1.WakePhaseScaling) || !slices.Contains(polled, string(elastiv1alpha1.WakePhaseStarting)) {
			t.Errorf("phases %v do not begin with Scaling (the first page load, at zero) and show Starting (the app's 20 s boot)", polled)
		}
	}

	browserReloadsIntoAnswer(ctx, t, browser, navigations, pageURL, filepath.Join(dir, "waking-page-answered.png"))
	// Serving on its own, the ElastiService shows no wake in progress.
	Eventually(t, time.Minute, 250*time.Millisecond, func(ctx context.Context) error {
		es, err := e.GetElastiService(ctx, ns, "demoapp")
		if err != nil {
			return err
		}
		if es.Status.Mode != elastiv1alpha1.ModeServe || es.Status.WakeProgress != nil {
			return fmt.Errorf("mode %s, wakeProgress %+v; want serve and none", es.Status.Mode, es.Status.WakeProgress)
		}
		return nil
	})
}

// startChromium starts headless Chromium with one tab open, and counts the
// tab's page navigations. The browser ends with the test.
func startChromium(t *testing.T) (context.Context, *atomic.Int32) {
	t.Helper()
	chromium := "/usr/bin/chromium"
	if _, err := os.Stat(chromium); err != nil {
		t.Fatalf("%s: %v (hack/install-deps.sh browser installs Debian's chromium)", chromium, err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1024, 640),
		// This machine's network is closed: no connections of Chromium's own.
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	// No timeout on the browser's context: it would end the browser. Each
	// step has its own.
	browser, cancelBrowser := chromedp.NewContext(alloc)
	t.Cleanup(cancelBrowser)
	navigations := new(atomic.Int32)
	// Listen starts Chromium and opens its tab.
	if err := chromedp.Listen(browser, func(ev any) {
		if f, ok := ev.(*page.EventFrameNavigated); ok && f.Frame.ParentID == "" {
			navigations.Add(1)
		}
	}); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	return browser, navigations
}

// browserOpensWakingPage has the browser open pageURL, checks that it shows
// the waking page in one of the wake's phases, and writes a screenshot of it
// to shotPath.
func browserOpensWakingPage(t *testing.T, browser context.Context, pageURL, shotPath string) {
	t.Helper()
	step, cancel := context.WithTimeout(browser, time.Minute)
	defer cancel()
	if err := chromedp.Do(step, chromedp.Navigate(pageURL), chromedp.WaitVisible(chromedp.CSS("#elasti-phase"))); err != nil {
		t.Fatalf("Chromium on the sleeping Service at %s: %v", pageURL, err)
	}
	attr, err := chromedp.Run(step, chromedp.AttributeValue(chromedp.CSS("#elasti-phase"), "data-phase"))
	if err != nil {
		t.Fatal(err)
	}
	shown, err := chromedp.Run(step, chromedp.Text(chromedp.CSS("body")))
	if err != nil {
		t.Fatal(err)
	}
	shot, err := chromedp.Run(step, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(wakePhases, elastiv1alpha1.WakePhase(attr.Value)) {
		t.Errorf("the waking page shows phase %q, not one of %v", attr.Value, wakePhases)
	}
	writeScreenshot(t, shotPath, shot)
	t.Logf("Chromium shows the waking page in phase %s: %q", attr.Value, strings.Join(strings.Fields(shown), " "))
}

// browserReloadsIntoAnswer waits until the browser, left alone, has
// reloaded pageURL into the demo app's answer, and writes a screenshot of it
// to shotPath.
func browserReloadsIntoAnswer(ctx context.Context, t *testing.T, browser context.Context, navigations *atomic.Int32, pageURL, shotPath string) {
	t.Helper()
	err := Poll(ctx, 2*time.Minute, 500*time.Millisecond, func(context.Context) error {
		step, cancel := context.WithTimeout(browser, 10*time.Second)
		defer cancel()
		text, err := chromedp.Run(step, chromedp.Text(chromedp.CSS("body")))
		if err != nil {
			return err
		}
		loc, err := chromedp.Run(step, chromedp.Location())
		if err != nil {
			return err
		}
		if loc != pageURL {
			return fmt.Errorf("the browser is at %s, not %s", loc, pageURL)
		}
		if !strings.HasPrefix(strings.TrimSpace(text), "hello from demoapp-") {
			return fmt.Errorf("the page still reads %q", strings.Join(strings.Fields(text), " "))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Chromium never reloaded into the app's answer: %v", err)
	}
	if n := navigations.Load(); n < 2 {
		t.Errorf("Chromium navigated %d times; the page must have reloaded itself at least once", n)
	}
	step, cancel := context.WithTimeout(browser, time.Minute)
	defer cancel()
	shot, err := chromedp.Run(step, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	writeScreenshot(t, shotPath, shot)
	t.Logf("Chromium reloaded itself %d times into the app's answer", navigations.Load()-1)
}

// writeScreenshot checks that shot is a PNG with more than one colour in
// it, and writes it to path.
func writeScreenshot(t testing.TB, path string, shot []byte) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	b := img.Bounds()
	first := img.At(b.Min.X, b.Min.Y)
	blank := true
	for y := b.Min.Y; y < b.Max.Y && blank; y += 4 {
		for x := b.Min.X; x < b.Max.X; x += 4 {
			if img.At(x, y) != first {
				blank = false
				break
			}
		}
	}
	if blank {
		t.Errorf("screenshot %s is a single colour: nothing was rendered", path)
	}
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot written to %s (%dx%d)", path, b.Dx(), b.Dy())
}
