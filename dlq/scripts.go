package dlq

import (
	"strconv"

	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
)

// This file holds the Go twins of the dlq scripts: typed arguments building
// each lua.Call and the parser of each reply (errors wrap lua.ErrReply and
// name the script).

// pageCall is lua/dlq_page.lua: at most limit of tenant's dead letters
// after the cursor (score, member), newest first; score "" is the newest.
func pageCall(tenant string, limit int, score, member string) lua.Call {
	return lua.Call{Script: lua.DLQPage,
		Keys: []string{keys.JobIndex(tenant, "dead"), keys.DeadRecords(tenant)},
		Args: []any{limit, score, member}}
}

// entry is one entry of dlq_page.lua's reply.
type entry struct {
	id    string
	score int64 // unix ms the job died
	rec   string
}

// parsePage checks dlq_page.lua's reply {id, score, record, ...}.
func parsePage(v any) ([]entry, error) {
	s := lua.DLQPage
	vals, err := s.Strings(v)
	if err != nil {
		return nil, err
	}
	if len(vals)%3 != 0 {
		return nil, s.ReplyError("%d values, want triples", len(vals))
	}
	out := make([]entry, 0, len(vals)/3)
	for i := 0; i < len(vals); i += 3 {
		f, err := strconv.ParseFloat(vals[i+1], 64)
		if err != nil {
			return nil, s.ReplyError("score %q of %s is not a number", vals[i+1], vals[i])
		}
		out = append(out, entry{id: vals[i], score: int64(f), rec: vals[i+2]})
	}
	return out, nil
}

// removal is one job of a dlq_remove.lua call: its id and the SHA-1 of its
// record as read ("" removes whatever is stored).
type removal struct {
	id, sha1 string
}

// removeCall is lua/dlq_remove.lua on tenant: mode "ids" for jobs, or "all"
// when jobs is nil.
func removeCall(tenant string, jobs []removal) lua.Call {
	args := []any{"all"}
	if jobs != nil {
		args = make([]any, 0, 1+2*len(jobs))
		args = append(args, "ids")
		for _, j := range jobs {
			args = append(args, j.id, j.sha1)
		}
	}
	return lua.Call{Script: lua.DLQRemove,
		Keys: []string{keys.JobIndex(tenant, "dead"), keys.DeadRecords(tenant)}, Args: args}
}

// parseRemove checks dlq_remove.lua's reply: how many were removed, >= 0.
func parseRemove(v any) (int, error) {
	s := lua.DLQRemove
	n, err := s.Int(v, "count")
	if err == nil && n < 0 {
		err = s.ReplyError("count %d, want >= 0", n)
	}
	return int(n), err
}

// claimCall is lua/dlq_claim.lua on tenant: mode "claim" of jobs (their
// ids and the SHA-1 of each record as read) or "release" of their ids, for
// the redrive token.
func claimCall(tenant, mode, token string, jobs []removal) lua.Call {
	args := make([]any, 0, 3+2*len(jobs))
	args = append(args, mode, token, keys.RedriveClaimTTL.Milliseconds())
	for _, j := range jobs {
		args = append(args, j.id)
		if mode == "claim" {
			args = append(args, j.sha1)
		}
	}
	return lua.Call{Script: lua.DLQClaim, Keys: []string{keys.DeadRedriving(tenant), keys.DeadRecords(tenant)}, Args: args}
}

// claimed is dlq_claim.lua's answer for one letter.
type claimed int8

const (
	claimGone claimed = -1 // the letter is gone or changed since it was read
	claimHeld claimed = 0  // another redrive holds it
	claimOurs claimed = 1  // this redrive holds it
)

// parseClaim checks dlq_claim.lua's reply to a claim of n letters: one of
// -1, 0 or 1 per letter.
func parseClaim(v any, n int) ([]claimed, error) {
	s := lua.DLQClaim
	vals, err := s.Ints(v, n)
	if err != nil {
		return nil, err
	}
	out := make([]claimed, n)
	for i, c := range vals {
		if c < -1 || c > 1 {
			return nil, s.ReplyError("claim %d of letter %d, want -1, 0 or 1", c, i+1)
		}
		out[i] = claimed(c)
	}
	return out, nil
}
