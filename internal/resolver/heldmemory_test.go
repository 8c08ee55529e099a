package resolver

import (
	"bufio"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"elasti.dev/elasti/internal/resolver/park"
)

// BenchmarkHeldMemory measures what one held HTTP/1.1 request costs the
// resolver, with heldN requests held at once: its live heap after a GC
// (B/held), its goroutines (goroutines/held: net/http's serve loop and its
// background read of the connection) and their stacks (stackB/held). The
// clients are raw TCP connections in this same process, a few hundred bytes
// each, so B/held slightly overstates the resolver's share. Every iteration then releases
// the requests and checks each was answered.
//
// The sub-benchmarks release the held requests paced (the default
// ReleaseConcurrency) and all at once, for the release time and the
// process's peak RSS during the release, side by side in one run.
//
// MiB-kept is what the process keeps from the OS (its mapped memory less
// what the runtime has returned) once every held request was answered and
// its connection closed, above the same figure before they were held: with
// the memory return after the drain (memoryReturner) measured once it ran,
// and without it ("no-return") measured after the same wait.
func BenchmarkHeldMemory(b *testing.B) {
	b.Run("paced", func(b *testing.B) { benchmarkHeld(b, DefaultReleaseConcurrency, true, park.ParkOnArrival) })
	b.Run("unpaced", func(b *testing.B) { benchmarkHeld(b, 1<<20, true, park.ParkOnArrival) })
	b.Run("paced-no-return", func(b *testing.B) { benchmarkHeld(b, DefaultReleaseConcurrency, false, park.ParkOnArrival) })
	b.Run("paced-from-handler", func(b *testing.B) { benchmarkHeld(b, DefaultReleaseConcurrency, true, park.ParkFromHandler) })
	b.Run("paced-in-handler", func(b *testing.B) { benchmarkHeld(b, DefaultReleaseConcurrency, true, park.HoldInHandler) })
}

func benchmarkHeld(b *testing.B, release int, returnMemory bool, parking park.Parking) {
	const heldN = 2000
	const returnAfter = 2 * time.Second
	atPeak := heldN
	if !returnMemory {
		atPeak = 1 << 30
	}
	h := newHarness(b, 1, func(o *Options) {
		o.Hold.MaxHeld, o.Hold.ReleaseConcurrency, o.Log = heldN, release, logr.Discard()
		o.Memory.ReturnAtPeak, o.Memory.ReturnAfter = atPeak, returnAfter
		o.Hold.Parking = parking
	})
	up := echoUpstream(b)
	h.mapPort("web", "websvc", nil, h.proxyPort(0, "http", ""))
	var perHeld, peakHeldRSS, stackPerHeld, goroutinesPerHeld, releaseMS, peakMiB, keptMiB float64
	returns := 0.0
	for b.Loop() {
		h.endpoints.Delete("ns", "websvc-abc")
		// The previous iteration's connections must be gone from the
		// baseline: close the pooled ones and wait for their goroutines.
		h.r.proxy.CloseIdle()
		up.CloseClientConnections()
		settle()
		before, stacksBefore, goroutines := liveBytes(), stackBytes(), runtime.NumGoroutine()
		// From a fully returned heap, so that what an earlier iteration
		// or sub-benchmark left free does not count in either case.
		debug.FreeOSMemory()
		keptBefore, rssBefore := keptBytes(), rss()
		resetPeakRSS()
		conns := make([]net.Conn, heldN)
		for i := range conns {
			c, err := net.Dial("tcp", h.addr(0))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := c.Write([]byte("GET /held HTTP/1.1\r\nHost: websvc\r\n\r\n")); err != nil {
				b.Fatal(err)
			}
			conns[i] = c
		}
		h.eventually("every request is held", func() bool { return h.held("web") == heldN })
		peakHeldRSS = (float64(peakRSS()) - float64(rssBefore)) / heldN
		perHeld = float64(liveBytes()-before) / heldN
		stackPerHeld = (float64(stackBytes()) - float64(stacksBefore)) / heldN
		goroutinesPerHeld = float64(runtime.NumGoroutine()-goroutines) / heldN
		resetPeakRSS()
		released := time.Now()
		h.ready("websvc", "websvc-abc", "http", upstreamAddr(up))
		for _, c := range conns {
			res, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				b.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				b.Fatalf("status %d", res.StatusCode)
			}
			c.Close()
		}
		releaseMS = float64(time.Since(released).Milliseconds())
		peakMiB = float64(peakRSS()) / (1 << 20)
		settle()
		if returnMemory {
			returns++
			h.eventually("the memory return after the drain", func() bool { return testutil.ToFloat64(h.r.metrics.MemoryReturns) == returns })
		} else {
			time.Sleep(returnAfter)
		}
		keptMiB = (float64(keptBytes()) - float64(keptBefore)) / (1 << 20)
	}
	b.ReportMetric(perHeld, "B/held")
	b.ReportMetric(peakHeldRSS, "peakRSSB/held")
	b.ReportMetric(stackPerHeld, "stackB/held")
	b.ReportMetric(goroutinesPerHeld, "goroutines/held")
	b.ReportMetric(releaseMS, "ms-release")
	b.ReportMetric(peakMiB, "MiB-peakRSS")
	b.ReportMetric(keptMiB, "MiB-kept")
}

// keptBytes is the memory the runtime has mapped and not returned to the
// OS: what it costs the process's RSS at most.
func keptBytes() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64() - s[1].Value.Uint64()
}

// resetPeakRSS resets the process's VmHWM (Linux; a no-op elsewhere).
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// peakRSS is the process's VmHWM in bytes, 0 where it cannot be read.
func peakRSS() uint64 { return procStatus("VmHWM:") }

// rss is the process's VmRSS in bytes, 0 where it cannot be read.
func rss() uint64 { return procStatus("VmRSS:") }

// procStatus reads one kB figure of /proc/self/status in bytes.
func procStatus(field string) uint64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// settle waits until the number of goroutines has not changed for 100ms.
func settle() {
	n := runtime.NumGoroutine()
	for range 100 {
		time.Sleep(100 * time.Millisecond)
		m := runtime.NumGoroutine()
		if m == n {
			return
		}
		n = m
	}
}

// stackBytes is the memory the runtime holds for goroutine stacks, in use
// or cached for reuse. Its growth while requests are held is what their
// goroutines' stacks cost; a stack freed before and reused for them makes
// it understate that a little.
func stackBytes() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/stacks:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// liveBytes is the heap's live objects after GCs. Goroutine stacks are
// left out: freed stacks are cached and reused, so their total depends on
// what ran before more than on what is held now.
func liveBytes() uint64 {
	// Twice: what sync.Pools hold survives one GC.
	runtime.GC()
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
