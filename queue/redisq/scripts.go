package redisq

import (
	"time"

	"github.com/sluicehq/sluice/internal/memo"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
	"github.com/sluicehq/sluice/queue/internal/batch"
)

// This file holds the Go twins of the scripts the Redis backend runs: each
// builds its lua.Call from typed arguments (the KEYS and ARGV order of the
// script's header) and parses its reply, checking shape and types; a reply
// of the wrong shape is an error wrapping lua.ErrReply that names the script.

// enqueueCall is lua/enqueue.lua for one tenant's jobs: RPUSH onto
// keys.Queue, INCRBY of keys.Backlog by their cost and each job's state
// "queued" (package jobstate).
func enqueueCall(b *batch.Tenant) lua.Call {
	ks, args := enqueueArgs(b, 0)
	return lua.Call{Script: lua.Enqueue, Keys: ks, Args: args}
}

// The scripts' TTL arguments, boxed once (an int64 this large allocates
// each time it is stored in an interface).
var (
	queueTTLArg    any = keys.QueueTTL.Milliseconds()
	backlogTTLArg  any = keys.BacklogTTL.Milliseconds()
	jobStateTTLArg any = keys.JobStateTTL.Milliseconds()
	deadTTLArg     any = keys.DeadTTL.Milliseconds()
)

// enqueueArgs are enqueue.lua's KEYS and ARGV for b (the layout
// enqueue_jobs.lua shares with submit.lua), its ARGV after lead free
// places at the front.
func enqueueArgs(b *batch.Tenant, lead int) ([]string, []any) {
	ks := make([]string, 0, 4+len(b.Jobs))
	tk := tenantKeys.Get(b.Tenant, enqueueTenantKeys)
	ks = append(ks, tk[:]...)
	for _, j := range b.Jobs {
		ks = append(ks, keys.JobState(b.Tenant, j.ID))
	}
	args := make([]any, lead, lead+4+5*len(b.Values))
	args = append(args, queueTTLArg, backlogTTLArg, b.Cost, jobStateTTLArg)
	for _, v := range b.Values {
		args = append(args, v)
	}
	for _, j := range b.Jobs {
		args = append(args, j.Type, j.EnqueuedAt.UnixMilli(), j.Cost, j.HeartbeatMS)
	}
	return ks, args
}

// tenantKeys memoizes enqueueTenantKeys: every enqueue of a tenant names the
// same four keys, and building them cost four allocations a job.
var tenantKeys = memo.Memo[string, [4]string]{Max: 1 << 16}

// enqueueTenantKeys are enqueue.lua's tenant-wide KEYS[1..4]: queue,
// backlog, job sequence, dispatched sequence.
func enqueueTenantKeys(t string) [4]string {
	return [4]string{keys.Queue(t), keys.Backlog(t), keys.JobSeq(t), keys.JobsDispatched(t)}
}

// parseEnqueue checks enqueue.lua's reply {queue_length, backlog}.
func parseEnqueue(v any) (length, backlog int64, err error) {
	n, err := lua.Enqueue.Ints(v, 2)
	if err != nil {
		return 0, 0, err
	}
	return n[0], n[1], nil
}

// claimArgs are lua/claim.lua's arguments: lease the head job of Tenant
// under Token for Lease, first moving up to promoteMax due retries to the
// head.
type claimArgs struct {
	Tenant string
	NowMS  int64 // 0: Redis TIME
	Lease  time.Duration
	Token  string
}

// promoteMax bounds how many due retries one claim moves to the queue head.
const promoteMax = 100

// Call returns the script call.
func (a claimArgs) Call() lua.Call {
	t := a.Tenant
	return lua.Call{Script: lua.Claim,
		Keys: []string{keys.Queue(t), keys.Processing(t), keys.Leased(t), keys.Delayed(t)},
		Args: []any{a.NowMS, a.Lease.Milliseconds(), a.Token, keys.QueueTTL.Milliseconds(), promoteMax, keys.JobState(t, "")}}
}

// claimReply is claim.lua's reply: Member and Envelope are "" when the
// queue is empty; NextDueMS is the earliest retry's due time, -1 when none;
// BeatMS the job's last heartbeat (0: none recorded) and NowMS the claim's
// time, both unix ms.
type claimReply struct {
	Member    string
	Envelope  string
	Cancelled bool
	NextDueMS int64
	BeatMS    int64
	NowMS     int64
	// DoneMS is the enqueued_at of a job recorded as done (0: not done).
	DoneMS int64
}

// parseClaim checks claim.lua's reply {member, envelope, cancelled (0|1),
// next_due_ms, beat_ms, now_ms, done_ms}.
func parseClaim(v any) (claimReply, error) {
	s := lua.Claim
	arr, err := s.Array(v, 7, 7)
	if err != nil {
		return claimReply{}, err
	}
	var r claimReply
	if r.Member, err = s.String(arr[0], "member"); err != nil {
		return r, err
	}
	if r.Envelope, err = s.String(arr[1], "envelope"); err != nil {
		return r, err
	}
	c, err := s.Int(arr[2], "cancelled")
	if err != nil {
		return r, err
	}
	if c != 0 && c != 1 {
		return r, s.ReplyError("cancelled is %d, want 0 or 1", c)
	}
	r.Cancelled = c == 1
	if r.NextDueMS, err = s.Int(arr[3], "next_due_ms"); err != nil {
		return r, err
	}
	if r.BeatMS, err = s.Int(arr[4], "beat_ms"); err != nil {
		return r, err
	}
	if r.NowMS, err = s.Int(arr[5], "now_ms"); err != nil {
		return r, err
	}
	if r.DoneMS, err = s.Int(arr[6], "done_ms"); err != nil {
		return r, err
	}
	return r, nil
}

// ackArgs are lua/ack.lua's arguments: finish the job leased under Member,
// write DeadLetter (JSON, "" when not dead; it died at DiedAt unix ms, 0
// for Redis TIME) to the tenant's dead letters, lower the backlog by Cost and
// record State with LastError and Reason.
type ackArgs struct {
	Tenant, JobID, Member string
	Cost                  int64
	DeadLetter            string
	DiedAt                int64
	State                 string
	LastError             string
	Reason                string
	// Refresh is keys.Refresh's Due for the tenant: the backlog's TTL is
	// refreshed and the done index trimmed (keys.DoneTrimEvery).
	Refresh bool
	// InLease is queue.Claimed.InLease: the delivery is not in
	// keys.Delivering.
	InLease bool
}

// maxAckJobs bounds the jobs of one ack.lua call (the script refuses more
// than 1000): a tenant's finishes beyond it go in further calls of the same
// pipeline.
const maxAckJobs = 256

// ackCall returns the ack.lua call that finishes jobs, all of one tenant
// (jobs[0].Tenant), each job id at most once (lua.Chunks): the tenant's keys,
// then one state key per job; the shared arguments, then 8 per job. The
// backlog's TTL is refreshed and the done index trimmed when any job's
// Refresh is set. A job with State "" (a duplicate, queue.Outcome.Duplicate)
// records nothing.
func ackCall(jobs []ackArgs) lua.Call {
	t := jobs[0].Tenant
	ks := make([]string, 0, 7+len(jobs))
	ks = append(ks, keys.Processing(t), keys.Leased(t), keys.Backlog(t), keys.JobIndex(t, "dead"),
		keys.JobsDispatched(t), keys.Delivering(t), keys.DeadRecords(t))
	refresh := false
	for _, a := range jobs {
		ks = append(ks, keys.JobState(t, a.JobID))
		refresh = refresh || a.Refresh
	}
	args := make([]any, 0, 6+8*len(jobs))
	args = append(args, backlogTTLArg, deadTTLArg, jobStateTTLArg, keys.DeadMaxJobs, lua.Flag(refresh), len(jobs))
	for _, a := range jobs {
		args = append(args, a.Member, a.Cost, a.DeadLetter, a.State, a.LastError, a.Reason, a.DiedAt, lua.Flag(a.InLease))
	}
	return lua.Call{Script: lua.Ack, Keys: ks, Args: args}
}

// parseAck checks ack.lua's reply to a call of n jobs: n integers, each 1
// (the lease was held and the job is finished) or 0 (the lease was lost).
func parseAck(v any, n int) ([]bool, error) {
	arr, err := lua.Ack.Ints(v, n)
	if err != nil {
		return nil, err
	}
	held := make([]bool, n)
	for i, x := range arr {
		if x != 0 && x != 1 {
			return nil, lua.Ack.ReplyError("element %d is %d, want 1 or 0", i+1, x)
		}
		held[i] = x == 1
	}
	return held, nil
}

// parseHeld checks the reply of a script that answers 1 when the lease was
// held and 0 when it was lost (release.lua).
func parseHeld(s *lua.Script, v any) (bool, error) {
	n, err := s.Int(v, "reply")
	if err != nil {
		return false, err
	}
	if n != 0 && n != 1 {
		return false, s.ReplyError("%d, want 1 or 0", n)
	}
	return n == 1, nil
}

// releaseArgs are lua/release.lua's arguments: end the lease of Member and
// put Envelope back at the head of Tenant's queue.
type releaseArgs struct {
	Tenant, Member string
	Envelope       []byte
	// JobID and Started, for a job whose start take.lua recorded and that
	// was not sent: the start is undone (Started 0: nothing to undo).
	JobID   string
	Started int
}

// Call returns the script call.
func (a releaseArgs) Call() lua.Call {
	t := a.Tenant
	c := lua.Call{Script: lua.Release,
		Keys: []string{keys.Processing(t), keys.Leased(t), keys.Queue(t)},
		Args: []any{a.Member, a.Envelope, keys.QueueTTL.Milliseconds()}}
	if a.Started > 0 {
		c.Keys = append(c.Keys, keys.JobState(t, a.JobID))
		c.Args = append(c.Args, a.Started)
	}
	return c
}

// deferArgs are lua/lease_defer.lua's arguments: end the lease of Member
// and hold Envelope in the delayed set for Delay, recording the state
// retrying with LastError.
type deferArgs struct {
	Tenant, JobID, Member string
	Delay                 time.Duration
	Envelope              []byte
	NowMS                 int64 // 0: Redis TIME
	LastError             string
}

// Call returns the script call.
func (a deferArgs) Call() lua.Call {
	t := a.Tenant
	return lua.Call{Script: lua.LeaseDefer,
		Keys: []string{keys.Processing(t), keys.Leased(t), keys.Delayed(t), keys.JobState(t, a.JobID), keys.Delivering(t)},
		Args: []any{a.Member, max(a.Delay.Milliseconds(), 0), a.Envelope, keys.QueueTTL.Milliseconds(), a.NowMS,
			a.LastError, keys.JobStateTTL.Milliseconds()}}
}

// parseDefer checks lease_defer.lua's reply: the due time in unix ms, 0
// when the lease was lost.
func parseDefer(v any) (dueMS int64, err error) {
	n, err := lua.LeaseDefer.Int(v, "due time")
	if err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, lua.LeaseDefer.ReplyError("due time %d, want >= 0", n)
	}
	return n, nil
}

// extendArgs are lua/lease_extend.lua's arguments on the processing set:
// push the deadline of Members' leases to now + Lease.
type extendArgs struct {
	Tenant  string
	NowMS   int64 // 0: Redis TIME
	Lease   time.Duration
	Members []string
}

// Call returns the script call.
func (a extendArgs) Call() lua.Call {
	args := make([]any, 0, len(a.Members)+2)
	args = append(args, a.NowMS, a.Lease.Milliseconds())
	for _, m := range a.Members {
		args = append(args, m)
	}
	return lua.Call{Script: lua.LeaseExtend, Keys: []string{keys.Processing(a.Tenant)}, Args: args}
}

// parseExtend checks lease_extend.lua's reply: the members whose lease was
// lost.
func parseExtend(v any) ([]string, error) { return lua.LeaseExtend.Strings(v) }

// reapArgs are lua/reap.lua's arguments: return up to Max of Tenant's
// expired leases to the head of its queue.
type reapArgs struct {
	Tenant string
	NowMS  int64 // 0: Redis TIME
	Max    int
}

// Call returns the script call.
func (a reapArgs) Call() lua.Call {
	t := a.Tenant
	return lua.Call{Script: lua.Reap, Keys: []string{keys.Processing(t), keys.Leased(t), keys.Queue(t)},
		Args: []any{a.NowMS, a.Max, keys.QueueTTL.Milliseconds()}}
}

// parseReap checks reap.lua's reply: how many leases it returned.
func parseReap(v any) (int, error) {
	n, err := lua.Reap.Int(v, "count")
	if err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, lua.Reap.ReplyError("count %d, want >= 0", n)
	}
	return int(n), nil
}
