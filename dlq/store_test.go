package dlq_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/dlq"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/redisq"
)

// writers write one dead letter the way each backend's finish does: the
// Redis backend's ack.lua and the Kafka backend's job_state_settle.lua,
// with keep as the count bound (keys.DeadMaxJobs in production).
var writers = map[string]func(t *testing.T, rdb *redis.Client, tenant, id, rec string, died time.Time, keep int){
	"ack.lua": func(t *testing.T, rdb *redis.Client, tn, id, rec string, died time.Time, keep int) {
		ctx := context.Background()
		rdb.ZAdd(ctx, keys.Processing(tn), redis.Z{Score: 1, Member: id + "|m"})
		c := lua.Call{Script: lua.Ack,
			Keys: []string{keys.Processing(tn), keys.Leased(tn), keys.Backlog(tn), keys.JobIndex(tn, "dead"),
				keys.JobsDispatched(tn), keys.Delivering(tn), keys.DeadRecords(tn), keys.JobState(tn, id)},
			Args: []any{keys.BacklogTTL.Milliseconds(), keys.DeadTTL.Milliseconds(), keys.JobStateTTL.Milliseconds(), keep, "0", 1,
				id + "|m", 1, rec, jobstate.Dead, "410", "rejected", died.UnixMilli(), "0"}}
		if v, err := c.Run(ctx, rdb).Int64Slice(); err != nil || len(v) != 1 || v[0] != 1 {
			t.Fatalf("ack.lua: %v, %v", v, err)
		}
	},
	"job_state_settle.lua": func(t *testing.T, rdb *redis.Client, tn, id, rec string, died time.Time, keep int) {
		c := jobstate.Settle{Tenant: tn, JobID: id, Member: id + "|m", State: jobstate.Dead, Reason: "rejected",
			DeadLetter: rec, DiedAt: died}.Call()
		c.Args[8] = keep // keys.DeadMaxJobs
		if err := c.Run(context.Background(), rdb).Err(); err != nil {
			t.Fatalf("job_state_settle.lua: %v", err)
		}
	},
}

// TestRetention: each write keeps the newest keep dead letters, drops those
// that died more than keys.DeadTTL before it (records and index alike), and
// gives both keys the TTL keys.DeadTTL. Both backends' scripts.
func TestRetention(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	ctx := context.Background()
	for name, write := range writers {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tn := testenv.Name(t, "ret")
			t0 := time.UnixMilli(1_700_000_000_000)
			for i := range 5 {
				write(t, rdb, tn, fmt.Sprint("j", i), `{"reason":"rejected"}`, t0.Add(time.Duration(i)*time.Second), 3)
			}
			ids := func() []string { return rdb.ZRange(ctx, keys.JobIndex(tn, "dead"), 0, -1).Val() }
			if diff := cmp.Diff([]string{"j2", "j3", "j4"}, ids()); diff != "" {
				t.Errorf("after 5 writes keeping 3 (-want +got):\n%s", diff)
			}
			if n := rdb.HLen(ctx, keys.DeadRecords(tn)).Val(); n != 3 {
				t.Errorf("%d records, want 3", n)
			}
			write(t, rdb, tn, "late", `{"reason":"rejected"}`, t0.Add(3*time.Second+keys.DeadTTL+time.Millisecond), 3)
			if diff := cmp.Diff([]string{"j4", "late"}, ids()); diff != "" {
				t.Errorf("after a write more than DeadTTL after j2 and j3 died (-want +got):\n%s", diff)
			}
			if got := rdb.HKeys(ctx, keys.DeadRecords(tn)).Val(); len(got) != 2 {
				t.Errorf("records %v, want those of j4 and late", got)
			}
			for _, k := range []string{keys.JobIndex(tn, "dead"), keys.DeadRecords(tn)} {
				if ttl := rdb.PTTL(ctx, k).Val(); ttl < keys.DeadTTL-time.Minute || ttl > keys.DeadTTL {
					t.Errorf("TTL of %s = %v, want %v", k, ttl, keys.DeadTTL)
				}
			}
		})
	}
}

// TestEncodeBounds: a dead letter over dlq.MaxRecordBytes keeps its fields,
// its job without the payload but its excerpt (cut on a UTF-8 boundary),
// and is marked truncated.
func TestEncodeBounds(t *testing.T) {
	t.Parallel()
	env := queue.Envelope{Version: 1, ID: "big", Tenant: "acme", Type: "t", Cost: 1,
		Payload: json.RawMessage(`"` + strings.Repeat("é", 40<<10) + `"`)}
	raw, _ := env.Encode()
	rec, err := dlq.Encode(queue.DeadLetter{Reason: "rejected", Status: 413, Attempts: 1, Response: strings.Repeat("r", 100<<10)}, raw)
	if err != nil {
		t.Fatal(err)
	}
	var st dlq.Stored
	if err := json.Unmarshal([]byte(rec), &st); err != nil || len(rec) > dlq.MaxRecordBytes {
		t.Fatalf("record of %d bytes (%v), want at most %d", len(rec), err, dlq.MaxRecordBytes)
	}
	if !st.Truncated || st.Reason != "rejected" || st.Status != 413 || len(st.Response) != dlq.ExcerptBytes {
		t.Errorf("stored %+v, want truncated with its reason, status and a response cut to %d bytes", st.DeadLetter, dlq.ExcerptBytes)
	}
	small, _ := dlq.Encode(queue.DeadLetter{Reason: "rejected"}, raw[:200])
	if strings.Contains(small, "truncated") {
		t.Errorf("a small record is marked: %s", small)
	}
	for _, n := range []int{0, 1, 2, 3, 255, 256} {
		s, cut := dlq.Cut(strings.Repeat("é", 200), n)
		if !utf8.ValidString(s) || len(s) > n || len(s) < n-1 || !cut {
			t.Errorf("Cut(200 × é, %d) = %d bytes (cut %v), want a valid prefix of %d or %d bytes", n, len(s), cut, n-1, n)
		}
	}
}

// TestRedriveSkipsAndGuards: a poison record (no envelope) and a cut one
// stay and are reported; a good one is enqueued with the same id, Attempt
// 0 and a fresh enqueued_at; a removal with a stale record's SHA-1 (the job
// died again since it was read) removes nothing.
func TestRedriveSkipsAndGuards(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	ctx := context.Background()
	tn := testenv.Name(t, "rd")
	prod, err := redisq.NewProducer(redisq.ProducerConfig{Redis: rdb})
	if err != nil {
		t.Fatal(err)
	}
	clk := testenv.NewClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	store, err := dlq.New(dlq.Config{Redis: rdb, Producer: prod, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	good := queue.Envelope{Version: 1, ID: "good", Tenant: tn, Type: "t", Cost: 2, Attempt: 3, Payload: json.RawMessage(`{"a":1}`),
		EnqueuedAt: time.Unix(1, 0)}
	raw, _ := good.Encode()
	big := good
	big.ID, big.Payload = "big", json.RawMessage(`"`+strings.Repeat("x", dlq.MaxRecordBytes)+`"`)
	bigRaw, _ := big.Encode()
	write := writers["job_state_settle.lua"]
	for id, r := range map[string][]byte{"good": raw, "poison": []byte("not json"), "big": bigRaw} {
		rec, _ := dlq.Encode(queue.DeadLetter{Reason: "rejected", Attempts: 3}, r)
		write(t, rdb, tn, id, rec, time.Now(), keys.DeadMaxJobs)
	}
	res, err := store.RedriveAll(ctx, tn)
	if err != nil {
		t.Fatal(err)
	}
	skipped := map[string]string{}
	for _, s := range res.Skipped {
		skipped[s.JobID] = s.Reason
	}
	if res.Redriven != 1 || !cmp.Equal(skipped, map[string]string{"poison": dlq.SkipPoison, "big": dlq.SkipTruncated}) {
		t.Errorf("redrive all = %+v, want 1 redriven, poison and big skipped", res)
	}
	q := rdb.LRange(ctx, keys.Queue(tn), 0, -1).Val()
	if len(q) != 1 {
		t.Fatalf("queue %v, want the good job", q)
	}
	got, err := queue.Decode([]byte(q[0]))
	want := good
	want.Attempt, want.EnqueuedAt = 0, clk.Now()
	if err != nil || !cmp.Equal(want, got) {
		t.Errorf("redriven envelope %+v (%v), want %+v", got, err, want)
	}
	if b, _ := rdb.Get(ctx, keys.Backlog(tn)).Int(); b != 2 {
		t.Errorf("backlog %d after the redrive, want the job's cost 2", b)
	}
	if r, err := jobstate.Get(ctx, rdb, tn, "good"); err != nil || r.State != jobstate.Queued || r.Attempt != 0 {
		t.Errorf("redriven job's state %+v (%v), want queued, attempt 0", r, err)
	}
	if n := rdb.ZCard(ctx, keys.JobIndex(tn, "dead")).Val(); n != 2 {
		t.Errorf("dead index holds %d, want the 2 skipped", n)
	}

	old := rdb.HGet(ctx, keys.DeadRecords(tn), "poison").Val()
	sum := sha1.Sum([]byte(old))
	rdb.HSet(ctx, keys.DeadRecords(tn), "poison", `{"reason":"rejected","attempts":4}`) // died again
	rm := lua.Call{Script: lua.DLQRemove, Keys: []string{keys.JobIndex(tn, "dead"), keys.DeadRecords(tn)},
		Args: []any{"ids", "poison", hex.EncodeToString(sum[:])}}
	if n, err := rm.Run(ctx, rdb).Int(); err != nil || n != 0 {
		t.Errorf("removal with a stale SHA-1 = %d, %v; want 0", n, err)
	}
	if n, err := store.Delete(ctx, tn, []string{"poison", "unknown"}); err != nil || n != 1 {
		t.Errorf("Delete(poison, unknown) = %d, %v; want 1", n, err)
	}
}

// gatedProducer holds its first Enqueue until open is closed.
type gatedProducer struct {
	queue.Producer
	first   chan struct{} // closed when the first Enqueue arrives
	open    chan struct{}
	entered bool
}

func (g *gatedProducer) Enqueue(ctx context.Context, jobs []queue.Envelope) error {
	if !g.entered {
		g.entered = true
		close(g.first)
		<-g.open
	}
	return g.Producer.Enqueue(ctx, jobs)
}

// TestConcurrentRedrives: a redrive that starts while another is putting
// the same dead letters back on the queue skips them (reason redriving)
// instead of enqueueing them a second time; the two together enqueue each
// job once and count it once. Before the claim, two redrives at once both
// read, enqueued and counted every letter (27 for 10 in a probe).
func TestConcurrentRedrives(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	ctx := context.Background()
	tn := testenv.Name(t, "cr")
	prod, err := redisq.NewProducer(redisq.ProducerConfig{Redis: rdb})
	if err != nil {
		t.Fatal(err)
	}
	gate := &gatedProducer{Producer: prod, first: make(chan struct{}), open: make(chan struct{})}
	store, err := dlq.New(dlq.Config{Redis: rdb, Producer: gate})
	if err != nil {
		t.Fatal(err)
	}
	write := writers["job_state_settle.lua"]
	var ids []string
	for i := range 10 {
		id := fmt.Sprint("d", i)
		env := queue.Envelope{Version: 1, ID: id, Tenant: tn, Type: "t", Cost: 1, EnqueuedAt: time.Unix(1, 0)}
		raw, _ := env.Encode()
		rec, _ := dlq.Encode(queue.DeadLetter{Reason: "rejected", Attempts: 3}, raw)
		write(t, rdb, tn, id, rec, time.Now(), keys.DeadMaxJobs)
		ids = append(ids, id)
	}
	first := make(chan dlq.Result, 1)
	go func() {
		res, err := store.RedriveAll(ctx, tn)
		if err != nil {
			t.Error(err)
		}
		first <- res
	}()
	<-gate.first // the first redrive holds its letters, its enqueue not done
	second, err := store.Redrive(ctx, tn, ids)
	if err != nil {
		t.Fatal(err)
	}
	close(gate.open)
	a := <-first
	if a.Redriven != 10 || second.Redriven != 0 || len(second.Skipped) != 10 || second.Skipped[0].Reason != dlq.SkipRedriving {
		t.Errorf("redrives at once = %+v and %+v, want 10 redriven by the first, the second skipping all 10 as redriving", a, second)
	}
	if n := rdb.LLen(ctx, keys.Queue(tn)).Val(); n != 10 {
		t.Errorf("queue holds %d jobs, want each of the 10 once", n)
	}
	if n := rdb.ZCard(ctx, keys.JobIndex(tn, "dead")).Val() + rdb.HLen(ctx, keys.DeadRedriving(tn)).Val(); n != 0 {
		t.Errorf("%d dead letters or claims left, want 0", n)
	}
	if res, err := store.Redrive(ctx, tn, ids); err != nil || res.Redriven != 0 || len(res.Skipped) != 0 {
		t.Errorf("a redrive afterwards = %+v, %v; want nothing (the letters are gone)", res, err)
	}
}

// hookProducer runs hook before its first Enqueue.
type hookProducer struct {
	queue.Producer
	hook func()
	once sync.Once
}

func (h *hookProducer) Enqueue(ctx context.Context, jobs []queue.Envelope) error {
	h.once.Do(h.hook)
	return h.Producer.Enqueue(ctx, jobs)
}

// TestRedriveAllPastAnotherRedrive: a RedriveAll whose first chunk meets
// letters another redrive holds (skipped as redriving) still redrives every
// other letter, although the other redrive removes its letters in the
// middle and shifts the index under the RedriveAll's offset: a second pass
// reads again from past the skips that stay. Before, the shifted letters
// were passed over and stayed dead. Each letter is enqueued once, and the
// claims script refuses a letter gone since it was read.
func TestRedriveAllPastAnotherRedrive(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	ctx := context.Background()
	tn := testenv.Name(t, "ra")
	prod, err := redisq.NewProducer(redisq.ProducerConfig{Redis: rdb})
	if err != nil {
		t.Fatal(err)
	}
	write := writers["job_state_settle.lua"]
	t0 := time.Now().Add(-time.Hour)
	letter := func(id string, at time.Time) {
		env := queue.Envelope{Version: 1, ID: id, Tenant: tn, Type: "t", Cost: 1, EnqueuedAt: time.Unix(1, 0)}
		raw, _ := env.Encode()
		rec, _ := dlq.Encode(queue.DeadLetter{Reason: "rejected", Attempts: 3}, raw)
		write(t, rdb, tn, id, rec, at, keys.DeadMaxJobs)
	}
	var held []string
	for i := range 150 { // d: the other redrive's, oldest; e, f after them
		id := fmt.Sprintf("%c%02d", "def"[i/50], i%50)
		letter(id, t0.Add(time.Duration(i)*time.Millisecond))
		if i < 50 {
			held = append(held, id)
		}
	}
	gateA := &gatedProducer{Producer: prod, first: make(chan struct{}), open: make(chan struct{})}
	storeA, _ := dlq.New(dlq.Config{Redis: rdb, Producer: gateA})
	doneA := make(chan dlq.Result, 1)
	go func() {
		res, err := storeA.Redrive(ctx, tn, held)
		if err != nil {
			t.Error(err)
		}
		doneA <- res
	}()
	<-gateA.first // A holds d00..d49, its enqueue waiting
	var a dlq.Result
	storeB, _ := dlq.New(dlq.Config{Redis: rdb, Producer: &hookProducer{Producer: prod, hook: func() {
		close(gateA.open) // A goes on and removes its letters in B's middle
		a = <-doneA
	}}})
	b, err := storeB.RedriveAll(ctx, tn)
	if err != nil {
		t.Fatal(err)
	}
	if a.Redriven != 50 || b.Redriven != 100 {
		t.Errorf("redriven %d by the first and %d by RedriveAll (skipped %d), want 50 and 100", a.Redriven, b.Redriven, len(b.Skipped))
	}
	if n := rdb.LLen(ctx, keys.Queue(tn)).Val(); n != 150 {
		t.Errorf("queue holds %d jobs, want each of the 150 once", n)
	}
	if n := rdb.ZCard(ctx, keys.JobIndex(tn, "dead")).Val(); n != 0 {
		t.Errorf("%d dead letters left, want 0", n)
	}
	// A claim of a letter gone since it was read is refused (-1).
	claim := lua.Call{Script: lua.DLQClaim, Keys: []string{keys.DeadRedriving(tn), keys.DeadRecords(tn)},
		Args: []any{"claim", "tok", 60000, "d00", "0000000000000000000000000000000000000000"}}
	if v, err := claim.Run(ctx, rdb).Int64Slice(); err != nil || len(v) != 1 || v[0] != -1 {
		t.Errorf("claim of a letter gone = %v, %v; want [-1]", v, err)
	}
}
