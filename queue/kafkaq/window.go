package kafkaq

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"strings"
)

// offsetWindow tracks which offsets of one partition are finished, from the
// commit watermark up: one bit per offset, set when the job at that offset
// is finished (delivered, dropped, dead-lettered) or when the offset holds
// no job (a gap in the log).
//
// The watermark wm is the lowest offset not finished; every offset below it
// is finished, so wm is the offset to commit (Kafka's committed offset is the
// next one to read). Bits below wm are dropped a word at a time, so memory is
// one bit per offset between wm and the highest finished offset: 128 KiB for
// a million offsets. Not safe for concurrent use.
type offsetWindow struct {
	base  int64 // offset of bit 0 of words[0]; a multiple of 64
	words []uint64
	wm    int64
}

// newOffsetWindow returns a window whose watermark is start: nothing at or
// above start is finished yet.
func newOffsetWindow(start int64) offsetWindow {
	return offsetWindow{base: start &^ 63, wm: start}
}

// watermark returns the lowest offset not finished.
func (w *offsetWindow) watermark() int64 { return w.wm }

// finished reports whether offset o is finished.
func (w *offsetWindow) finished(o int64) bool {
	if o < w.wm {
		return true
	}
	i := (o - w.base) >> 6
	if i >= int64(len(w.words)) {
		return false
	}
	return w.words[i]&(1<<uint((o-w.base)&63)) != 0
}

// finish marks offset o finished and moves the watermark past every
// finished offset that now follows it.
func (w *offsetWindow) finish(o int64) {
	if o < w.wm {
		return
	}
	i := w.grow(o)
	w.words[i] |= 1 << uint((o-w.base)&63)
	if o == w.wm {
		w.advance()
	}
}

// finishRange marks the offsets from..to-1 finished.
func (w *offsetWindow) finishRange(from, to int64) {
	from = max(from, w.wm)
	if from >= to {
		return
	}
	w.grow(to - 1)
	for o := from; o < to; {
		i := (o - w.base) >> 6
		bit := uint((o - w.base) & 63)
		n := min(to-o, 64-int64(bit))
		mask := ^uint64(0)
		if n < 64 {
			mask = (1<<uint(n) - 1) << bit
		}
		w.words[i] |= mask
		o += n
	}
	if from == w.wm {
		w.advance()
	}
}

// grow extends words to hold offset o and returns o's word index.
func (w *offsetWindow) grow(o int64) int64 {
	i := (o - w.base) >> 6
	for int64(len(w.words)) <= i {
		w.words = append(w.words, 0)
	}
	return i
}

// advance moves wm past the run of finished offsets starting at it and drops
// the words wholly below the new wm.
func (w *offsetWindow) advance() {
	for {
		i := (w.wm - w.base) >> 6
		if i >= int64(len(w.words)) {
			break
		}
		bit := uint((w.wm - w.base) & 63)
		run := bits.TrailingZeros64(^(w.words[i] >> bit)) // set bits from bit up
		if run > 64-int(bit) {
			run = 64 - int(bit)
		}
		w.wm += int64(run)
		if run < 64-int(bit) {
			break
		}
	}
	drop := (w.wm - w.base) >> 6
	switch {
	case drop <= 0:
	case drop >= int64(len(w.words)):
		w.words = w.words[:0]
		w.base = w.wm &^ 63
	default:
		w.words = w.words[drop:]
		w.base += drop << 6
	}
}

// next returns the first offset >= from whose bit equals set, or end when
// there is none below end.
func (w *offsetWindow) next(from, end int64, set bool) int64 {
	for o := max(from, w.base); o < end; {
		i := (o - w.base) >> 6
		if i >= int64(len(w.words)) {
			if set {
				return end
			}
			return o
		}
		word := w.words[i]
		if !set {
			word = ^word
		}
		bit := uint((o - w.base) & 63)
		if rest := word >> bit; rest != 0 {
			return min(o+int64(bits.TrailingZeros64(rest)), end)
		}
		o += 64 - int64(bit)
	}
	return end
}

// end returns one past the highest offset the words cover.
func (w *offsetWindow) end() int64 { return w.base + int64(len(w.words))<<6 }

// metaPrefix starts the commit metadata this consumer writes; another
// prefix (another client's metadata) is ignored.
const metaPrefix = "sluice1:"

// encodeFinished describes the finished offsets above the watermark as
// commit metadata: metaPrefix and the URL-safe base64 of uvarint pairs
// (unfinished run, finished run) starting at the watermark. It stops before
// maxLen characters, leaving out the farther runs: they are then delivered
// again after a restart, which at-least-once allows. "" when no offset
// above the watermark is finished.
func (w *offsetWindow) encodeFinished(maxLen int) string {
	budget := base64.RawURLEncoding.DecodedLen(maxLen - len(metaPrefix))
	var buf []byte
	var tmp [2 * binary.MaxVarintLen64]byte
	end := w.end()
	for o := w.wm; o < end; {
		f := w.next(o, end, true)
		if f >= end {
			break
		}
		u := w.next(f, end, false)
		n := binary.PutUvarint(tmp[:], uint64(f-o))
		n += binary.PutUvarint(tmp[n:], uint64(u-f))
		if len(buf)+n > budget {
			break
		}
		buf = append(buf, tmp[:n]...)
		o = u
	}
	if len(buf) == 0 {
		return ""
	}
	return metaPrefix + base64.RawURLEncoding.EncodeToString(buf)
}

// errBadMetadata is returned by applyFinished for metadata it cannot read.
var errBadMetadata = errors.New("queue: kafka commit metadata")

// applyFinished marks finished the offsets that meta (written by
// encodeFinished at the watermark w has now) lists, up to limit offsets
// above the watermark. Metadata without metaPrefix (or empty) is ignored.
func (w *offsetWindow) applyFinished(meta string, limit int64) error {
	rest, ok := strings.CutPrefix(meta, metaPrefix)
	if !ok {
		return nil
	}
	buf, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil {
		return fmt.Errorf("%w: %w", errBadMetadata, err)
	}
	o, stop := w.wm, w.wm+limit
	for len(buf) > 0 {
		u, n := binary.Uvarint(buf)
		if n <= 0 {
			return fmt.Errorf("%w: bad varint", errBadMetadata)
		}
		buf = buf[n:]
		f, n := binary.Uvarint(buf)
		if n <= 0 || u == 0 || f == 0 {
			return fmt.Errorf("%w: bad run", errBadMetadata)
		}
		buf = buf[n:]
		if u >= uint64(stop-o) {
			return nil
		}
		from := o + int64(u)
		to := from + int64(min(f, uint64(stop-from)))
		w.finishRange(from, to)
		o = to
	}
	return nil
}
