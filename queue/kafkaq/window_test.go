package kafkaq

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// op is one step on an offsetWindow: finish one offset, or a range when to
// is set.
type op struct{ from, to int64 }

func apply(w *offsetWindow, ops []op) {
	for _, o := range ops {
		if o.to == 0 {
			w.finish(o.from)
		} else {
			w.finishRange(o.from, o.to)
		}
	}
}

func TestOffsetWindowWatermark(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		start int64
		ops   []op
		want  int64
	}{
		{"nothing finished", 100, nil, 100},
		{"in order", 0, []op{{0, 0}, {1, 0}, {2, 0}}, 3},
		{"out of order: lowest unfinished", 0, []op{{1, 0}, {2, 0}, {4, 0}}, 0},
		{"hole filled", 0, []op{{1, 0}, {2, 0}, {4, 0}, {0, 0}}, 3},
		{"all filled", 0, []op{{1, 0}, {2, 0}, {4, 0}, {0, 0}, {3, 0}}, 5},
		{"below the start is ignored", 10, []op{{3, 0}, {9, 0}}, 10},
		{"across words", 60, []op{{61, 0}, {62, 0}, {63, 0}, {64, 0}, {65, 0}, {60, 0}}, 66},
		{"range from the watermark", 5, []op{{5, 200}}, 200},
		{"range above a hole", 0, []op{{1, 130}}, 0},
		{"range then the hole", 0, []op{{1, 130}, {0, 0}}, 130},
		{"range over finished bits", 0, []op{{3, 0}, {0, 10}}, 10},
		{"word-aligned run", 64, []op{{64, 192}, {192, 0}}, 193},
		{"twice the same offset", 0, []op{{0, 0}, {0, 0}}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newOffsetWindow(tc.start)
			apply(&w, tc.ops)
			if got := w.watermark(); got != tc.want {
				t.Errorf("watermark after %v = %d, want %d", tc.ops, got, tc.want)
			}
		})
	}
}

// TestOffsetWindowMatchesASet finishes random offsets and compares every
// answer with a plain set, and checks that words below the watermark are
// dropped.
func TestOffsetWindowMatchesASet(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	const start, n = 1000, 5000
	w := newOffsetWindow(start)
	done := map[int64]bool{}
	for i := 0; i < 20000; i++ {
		o := start + r.Int64N(n)
		if r.IntN(10) == 0 {
			to := o + r.Int64N(100)
			w.finishRange(o, to)
			for x := o; x < to; x++ {
				done[x] = true
			}
		} else {
			w.finish(o)
			done[o] = true
		}
		wm := int64(start)
		for done[wm] {
			wm++
		}
		if w.watermark() != wm {
			t.Fatalf("step %d: watermark %d, want %d", i, w.watermark(), wm)
		}
		if probe := start + r.Int64N(n+100); w.finished(probe) != (done[probe] || probe < start) {
			t.Fatalf("step %d: finished(%d) = %v, want %v", i, probe, w.finished(probe), done[probe])
		}
		if w.base > w.wm || w.wm-w.base >= 64 {
			t.Fatalf("step %d: base %d keeps words below watermark %d", i, w.base, w.wm)
		}
	}
}

func TestOffsetWindowMetadataRoundTrip(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		start  int64
		ops    []op
		maxLen int
		// want lists the offsets above the watermark a restart skips.
		want []int64
	}{
		{"none finished above", 7, []op{{8, 0}, {7, 0}}, 3000, nil},
		{"out of order", 0, []op{{1, 0}, {2, 0}, {4, 0}, {5, 0}}, 3000, []int64{1, 2, 4, 5}},
		{"long run", 100, []op{{150, 100_150}}, 3000, nil},
		{"budget keeps the nearest runs", 0, []op{{2, 0}, {4, 0}, {6, 0}, {8, 0}}, len(metaPrefix) + 6, []int64{2, 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newOffsetWindow(tc.start)
			apply(&w, tc.ops)
			meta := w.encodeFinished(tc.maxLen)
			if len(meta) > tc.maxLen {
				t.Errorf("metadata %q is %d long, want <= %d", meta, len(meta), tc.maxLen)
			}
			r := newOffsetWindow(w.watermark())
			if err := r.applyFinished(meta, 1<<20); err != nil {
				t.Fatalf("applyFinished(%q): %v", meta, err)
			}
			if r.watermark() != w.watermark() {
				t.Errorf("watermark after restart %d, want %d", r.watermark(), w.watermark())
			}
			var got []int64
			for o := r.watermark(); o < w.watermark()+200; o++ {
				if r.finished(o) {
					got = append(got, o)
				}
			}
			want := tc.want
			if tc.name == "long run" {
				want = nil
				for o := int64(150); o < 300; o++ {
					want = append(want, o)
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("finished offsets after restart (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOffsetWindowApplyFinishedRejectsOrIgnores(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		meta    string
		wantErr bool
	}{
		{"", false},
		{"someone-else's metadata", false},
		{metaPrefix + "!!!", true},
		{metaPrefix + "AA", true},   // a zero run
		{metaPrefix + "gA", true},   // a truncated varint
		{metaPrefix + "AQE", false}, // 1 unfinished, 1 finished
	} {
		w := newOffsetWindow(0)
		err := w.applyFinished(tc.meta, 100)
		if (err != nil) != tc.wantErr {
			t.Errorf("applyFinished(%q) = %v, want error %v", tc.meta, err, tc.wantErr)
		}
	}
	// The limit caps how far metadata may reach above the watermark.
	w := newOffsetWindow(0)
	big := newOffsetWindow(0)
	big.finishRange(1, 1_000_000)
	if err := w.applyFinished(big.encodeFinished(3000), 64); err != nil {
		t.Fatal(err)
	}
	if !w.finished(63) || w.finished(64) || len(w.words) > 1 {
		t.Errorf("limit 64: finished(63)=%v finished(64)=%v words=%d, want true false 1", w.finished(63), w.finished(64), len(w.words))
	}
	if !strings.HasPrefix(big.encodeFinished(3000), metaPrefix) {
		t.Errorf("metadata lacks prefix %q", metaPrefix)
	}
}

func BenchmarkOffsetWindowFinish(b *testing.B) {
	b.ReportAllocs()
	w := newOffsetWindow(0)
	// Finish in pairs out of order, as concurrent deliveries do.
	for i := 0; i < b.N; i++ {
		o := int64(i ^ 1)
		w.finish(o)
	}
	if w.watermark() < int64(b.N)-2 {
		b.Fatalf("watermark %d after %d finishes", w.watermark(), b.N)
	}
}
