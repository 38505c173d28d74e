package dlq

import (
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
)

// MaxIDs is the most job ids one Redrive or Delete call takes
// (POST …/dlq:redrive {"job_ids": […]}).
const MaxIDs = 1000

// chunk is how many dead letters one step of a redrive reads, enqueues
// and removes.
const chunk = 100

// Why a dead letter was not redriven.
const (
	// SkipPoison: the stored job is no envelope of the tenant.
	SkipPoison = "poison"
	// SkipTruncated: the record was cut to MaxRecordBytes.
	SkipTruncated = "truncated"
	// SkipRedriving: another redrive holds the letter (keys.DeadRedriving)
	// and puts it back on the queue itself (so, unlike the others, it does
	// not stay in the DLQ).
	SkipRedriving = "redriving"
)

// Skip is a dead letter that was not redriven by this call; it stays in the
// DLQ, unless another redrive holds it (SkipRedriving).
type Skip struct {
	JobID  string `json:"job_id"`
	Reason string `json:"reason"`
}

// Result is what a Redrive did.
type Result struct {
	// Redriven counts the jobs put back on the queue.
	Redriven int
	// Skipped lists the dead letters that could not be redriven.
	Skipped []Skip
}

// Redrive puts tenant's dead jobs ids back on its queue through the
// Store's Producer, oldest first in chunks: each with the same id, type,
// cost, payload and deadline, Attempt 0 and a fresh EnqueuedAt, so it is
// queued and counted in the backlog like any submitted job (admission
// limits and max_backlog do not apply: an operator asked for it). Once the
// producer has acknowledged a chunk, the chunk's dead letters are removed
// (lua/dlq_remove.lua), each only if its record is still the one read: a
// crash in between leaves them in the DLQ as well as on the queue (at least
// once; a redrive after keys.RedriveClaimTTL enqueues the id again), and a
// job that died again meanwhile keeps its new dead letter. Before its
// enqueue a chunk claims its letters (dlq_claim.lua): a letter another
// redrive holds is skipped (SkipRedriving), so two redrives at once never
// both enqueue it, and each counts only what it enqueued. Unknown ids are
// not counted, an id given twice is redriven once; a record with no
// envelope or a cut one is skipped and stays.
func (s *Store) Redrive(ctx context.Context, tenant string, ids []string) (Result, error) {
	var res Result
	ids = unique(ids)
	for start := 0; start < len(ids); start += chunk {
		part := ids[start:min(start+chunk, len(ids))]
		recs, err := s.rdb.HMGet(ctx, keys.DeadRecords(tenant), part...).Result()
		if err != nil {
			return res, fmt.Errorf("dlq: redrive %s: %w", tenant, err)
		}
		found := make([]found, 0, len(part))
		var gone []removal
		for i, v := range recs {
			if rec, ok := v.(string); ok {
				found = append(found, foundRec(part[i], rec))
			} else {
				gone = append(gone, removal{id: part[i]})
			}
		}
		if len(gone) > 0 { // index entries left without a record
			if _, err := s.remove(ctx, tenant, gone); err != nil {
				return res, err
			}
		}
		if err := s.redriveChunk(ctx, tenant, found, &res); err != nil {
			return res, err
		}
	}
	return res, nil
}

// RedriveAll redrives every dead letter of tenant that died no later than
// the newest one when it starts, oldest first, chunk by chunk (as Redrive).
func (s *Store) RedriveAll(ctx context.Context, tenant string) (Result, error) {
	var res Result
	idx := keys.JobIndex(tenant, "dead")
	newest, err := s.rdb.ZRevRangeWithScores(ctx, idx, 0, 0).Result()
	if err != nil || len(newest) == 0 {
		return res, wrapErr("redrive", tenant, err)
	}
	upTo := strconv.FormatFloat(newest[0].Score, 'f', -1, 64)
	// Each step removes its redriven entries, so the entries up to upTo
	// left are the ones this call skipped (offset), then those not read
	// yet; a step that finds none ends a pass. Those another redrive held
	// (SkipRedriving) leave when it removes them, which may shift the
	// entries not read yet under the offset: so after a pass that skipped
	// any, a second pass reads again from past the skips that stay, and
	// redrives what the first missed. The bound only guards against a loop.
	offset, second := 0, false
	for step := 0; step < 2*keys.DeadMaxJobs/chunk+10; step++ {
		ids, err := s.rdb.ZRangeArgs(ctx, redis.ZRangeArgs{Key: idx, Start: "-inf", Stop: upTo, ByScore: true,
			Offset: int64(offset), Count: chunk}).Result()
		if err != nil {
			return dedupSkips(res), wrapErr("redrive", tenant, err)
		}
		if len(ids) == 0 {
			if second || staying(res.Skipped) == len(res.Skipped) {
				return dedupSkips(res), nil
			}
			second, offset = true, staying(dedupSkips(res).Skipped)
			continue
		}
		part, err := s.Redrive(ctx, tenant, ids)
		res.Redriven += part.Redriven
		res.Skipped = append(res.Skipped, part.Skipped...)
		offset += len(part.Skipped)
		if err != nil {
			return dedupSkips(res), err
		}
	}
	return dedupSkips(res), nil
}

// dedupSkips keeps the last skip of each letter in res (a second pass of
// RedriveAll reads its letters again).
func dedupSkips(res Result) Result {
	last := make(map[string]int, len(res.Skipped))
	for i, sk := range res.Skipped {
		last[sk.JobID] = i
	}
	out := res.Skipped[:0:0]
	for i, sk := range res.Skipped {
		if last[sk.JobID] == i {
			out = append(out, sk)
		}
	}
	res.Skipped = out
	return res
}

// staying counts the skips whose letters stay in the dead index: all but
// those another redrive holds (SkipRedriving), which it removes.
func staying(skips []Skip) int {
	n := 0
	for _, sk := range skips {
		if sk.Reason != SkipRedriving {
			n++
		}
	}
	return n
}

// unique returns ids without repeats, in their first order.
func unique(ids []string) []string {
	seen := make(map[string]bool, len(ids))
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// found is one dead letter read for a redrive.
type found struct {
	id, sha1 string
	st       Stored
	ok       bool
}

func foundRec(id, rec string) found {
	sum := sha1.Sum([]byte(rec))
	st, ok := decodeStored(rec)
	return found{id: id, sha1: hex.EncodeToString(sum[:]), st: st, ok: ok}
}

// redriveChunk enqueues the redrivable dead letters of recs in one
// Producer call and then removes them, adding to res.
func (s *Store) redriveChunk(ctx context.Context, tenant string, recs []found, res *Result) error {
	now := s.clock.Now().UTC()
	jobs := make([]queue.Envelope, 0, len(recs))
	done := make([]removal, 0, len(recs))
	for _, f := range recs {
		env, skip := f.st.envelope(tenant)
		if !f.ok {
			skip = SkipPoison
		}
		if skip != "" {
			res.Skipped = append(res.Skipped, Skip{JobID: f.id, Reason: skip})
			continue
		}
		// A redriven job is the operator's: its submitter's heartbeat (if
		// any) is not asked of it again.
		env.Attempt, env.EnqueuedAt, env.HeartbeatMS = 0, now, 0
		jobs = append(jobs, env)
		done = append(done, removal{id: f.id, sha1: f.sha1})
	}
	if len(jobs) == 0 {
		return nil
	}
	token, err := newToken()
	if err != nil {
		return fmt.Errorf("dlq: redrive %s: %w", tenant, err)
	}
	if jobs, done, err = s.claim(ctx, tenant, token, jobs, done, res); err != nil || len(jobs) == 0 {
		return err
	}
	// The dead jobs' states lose enqueued_at first, so that on Kafka the
	// post-ack write (job_state_enqueue.lua) records them queued even when
	// a drainer got one first, and never over the state it recorded; and
	// the start_enqueued_at of an earlier life, which a copy check would
	// read in its place (kafka_take.lua).
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, j := range jobs {
			p.HDel(ctx, keys.JobState(tenant, j.ID), "enqueued_at", "start_enqueued_at")
		}
		return nil
	}); err != nil {
		return fmt.Errorf("dlq: redrive %s: %w", tenant, err)
	}
	if err := s.producer.Enqueue(ctx, jobs); err != nil {
		if !errors.Is(err, queue.ErrUnknownOutcome) {
			s.release(ctx, tenant, token, done) // surely not queued: redrivable again at once
		}
		return fmt.Errorf("dlq: redrive %s: enqueue: %w", tenant, err)
	}
	res.Redriven += len(jobs)
	if _, err := s.remove(ctx, tenant, done); err != nil {
		return fmt.Errorf("dlq: redrive %s: enqueued, but the dead letters stay: %w", tenant, err)
	}
	s.release(ctx, tenant, token, done)
	return nil
}

// claim claims the dead letters of jobs (their removals: id and the SHA-1
// read) for the redrive token (dlq_claim.lua) and returns the jobs it
// holds, with their removals; each one another redrive holds is skipped
// (SkipRedriving) in res, and one gone or changed since it was read (put
// back by another redrive meanwhile) is left out, as an unknown id is.
func (s *Store) claim(ctx context.Context, tenant, token string, jobs []queue.Envelope, done []removal, res *Result) ([]queue.Envelope, []removal, error) {
	v, err := claimCall(tenant, "claim", token, done).Run(ctx, s.rdb).Result()
	var got []claimed
	if err == nil {
		got, err = parseClaim(v, len(done))
	}
	if err != nil {
		return nil, nil, fmt.Errorf("dlq: redrive %s: claim: %w", tenant, err)
	}
	keepJobs, keepDone := jobs[:0], done[:0]
	for i, c := range got {
		switch c {
		case claimOurs:
			keepJobs, keepDone = append(keepJobs, jobs[i]), append(keepDone, done[i])
		case claimHeld:
			res.Skipped = append(res.Skipped, Skip{JobID: done[i].id, Reason: SkipRedriving})
		}
	}
	return keepJobs, keepDone, nil
}

// release ends the redrive token's claims on the letters of done, best
// effort: a claim left ends after keys.RedriveClaimTTL.
func (s *Store) release(ctx context.Context, tenant, token string, done []removal) {
	_ = claimCall(tenant, "release", token, done).Run(context.WithoutCancel(ctx), s.rdb).Err()
}

// newToken is a redrive's claim token: 16 random hex digits.
func newToken() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("claim token: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// Delete removes tenant's dead letters of jobs ids and reports how many
// there were (unknown ids count 0).
func (s *Store) Delete(ctx context.Context, tenant string, ids []string) (int, error) {
	rm := make([]removal, len(ids))
	for i, id := range ids {
		rm[i] = removal{id: id}
	}
	n := 0
	for start := 0; start < len(rm); start += chunk {
		k, err := s.remove(ctx, tenant, rm[start:min(start+chunk, len(rm))])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// DeleteAll removes every dead letter of tenant and reports how many there
// were.
func (s *Store) DeleteAll(ctx context.Context, tenant string) (int, error) {
	return s.remove(ctx, tenant, nil)
}

// remove runs dlq_remove.lua for jobs (nil: all).
func (s *Store) remove(ctx context.Context, tenant string, jobs []removal) (int, error) {
	v, err := removeCall(tenant, jobs).Run(ctx, s.rdb).Result()
	if err != nil {
		return 0, fmt.Errorf("dlq: delete %s: %w", tenant, err)
	}
	n, err := parseRemove(v)
	if err != nil {
		return 0, fmt.Errorf("dlq: delete %s: %w", tenant, err)
	}
	return n, nil
}

// wrapErr wraps a Redis error of op on tenant; nil stays nil.
func wrapErr(op, tenant string, err error) error {
	if err == nil || errors.Is(err, redis.Nil) {
		return nil
	}
	return fmt.Errorf("dlq: %s %s: %w", op, tenant, err)
}
