package jobstate

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
)

// Page sizes of List (GET /v1/jobs?limit=).
const (
	// ListDefault is the page size when none is asked for.
	ListDefault = 50
	// ListMax is the largest page.
	ListMax = 500
)

// ErrCursor is returned by ParseCursor for a cursor List did not hand out.
var ErrCursor = errors.New("jobstate: not a job list cursor")

// Cursor is where a page of List starts: after the index entry (Score,
// Member). It stays correct while jobs move: a job that left the index
// meanwhile shifts nothing, since the next page starts after its place in
// the order, not at an offset.
type Cursor struct {
	Score  int64
	Member string
}

// String is the cursor as an opaque token (base64url).
func (c Cursor) String() string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.Score, 10) + ":" + c.Member))
}

// ParseCursor reads a token Cursor.String made; any other is ErrCursor.
func ParseCursor(s string) (Cursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return Cursor{}, ErrCursor
	}
	score, member, ok := strings.Cut(string(b), ":")
	n, err := strconv.ParseInt(score, 10, 64)
	if !ok || err != nil || member == "" {
		return Cursor{}, ErrCursor
	}
	return Cursor{Score: n, Member: member}, nil
}

// Newest reports whether a state's list is newest first (dead, done); the
// others are in the order the jobs leave: queued by position, scheduled by
// due time, in_flight by start, retrying by due time.
func Newest(state string) bool { return state == Dead || state == Done }

// ListPage is one page of a tenant's jobs in one state.
type ListPage struct {
	// Jobs are the page's records, in the list's order; a queued one has
	// Ahead set as Get sets it.
	Jobs []Record
	// Next is where the next page starts; nil at the end.
	Next *Cursor
}

// listReadFactor bounds the index entries one call reads (limit × it + 100),
// so a run of stale entries costs a bounded call and ends the page early.
const listReadFactor = 2

// List returns one page of tenant's jobs in state (one of
// keys.ListedStates): at most limit (1 to ListMax; others are clamped),
// after the cursor (nil: the first page), in the order Newest says. One
// round trip (lua/job_list.lua) reads the index keys.JobIndex and each
// job's state hash; an id whose hash is gone or holds another state is
// skipped, and removed from the index when the state is one this package
// writes (queued, in_flight, retrying, done; the dead and scheduled indexes
// belong to their writers). A page can then be shorter than limit with a
// Next; follow Next until it is nil.
func List(ctx context.Context, rdb redis.UniversalClient, tenant, state string, after *Cursor, limit int) (ListPage, error) {
	if !slices.Contains(keys.ListedStates, state) {
		return ListPage{}, fmt.Errorf("jobstate: list %s: state %q is not one of %v", tenant, state, keys.ListedStates)
	}
	limit = min(max(limit, 1), ListMax)
	v, err := listCall(tenant, state, after, limit).Run(ctx, rdb).Result()
	if err != nil {
		return ListPage{}, fmt.Errorf("jobstate: list %s %s: %w", tenant, state, err)
	}
	page, err := listReply(tenant, after, v)
	if err != nil {
		return ListPage{}, fmt.Errorf("jobstate: list %s %s: %w", tenant, state, err)
	}
	return page, nil
}

// listCall is the call of job_list.lua for one page.
func listCall(tenant, state string, after *Cursor, limit int) lua.Call {
	order, score, member := "asc", "", ""
	if Newest(state) {
		order = "desc"
	}
	if after != nil {
		score, member = strconv.FormatInt(after.Score, 10), after.Member
	}
	prune := "0"
	if state != Dead && state != Scheduled {
		prune = "1"
	}
	return lua.Call{Script: lua.JobList,
		Keys: []string{keys.JobIndex(tenant, state), keys.JobsDispatched(tenant)},
		Args: []any{state, order, score, member, limit, keys.JobState(tenant, ""), limit*listReadFactor + 100, prune}}
}

// listReply reads job_list.lua's reply {dispatched, more, last_score,
// last_member, stale, {id, score, {field, value...}}...}.
func listReply(tenant string, after *Cursor, v any) (ListPage, error) {
	s := lua.JobList
	arr, err := s.Array(v, 5, -1)
	if err != nil {
		return ListPage{}, err
	}
	head, err := s.Ints(arr[:2], 2)
	if err != nil {
		return ListPage{}, err
	}
	gone, more := max(head[0], 0), head[1] == 1
	lastScore, err := s.String(arr[2], "last_score")
	if err != nil {
		return ListPage{}, err
	}
	lastMember, err := s.String(arr[3], "last_member")
	if err != nil {
		return ListPage{}, err
	}
	page := ListPage{Jobs: make([]Record, 0, len(arr)-5)}
	for i, row := range arr[5:] {
		rec, err := listRow(s, tenant, row, i)
		if err != nil {
			return ListPage{}, err
		}
		if rec.State == Queued && rec.Seq > 0 {
			rec.Ahead = max(0, rec.Seq-gone-1)
		}
		page.Jobs = append(page.Jobs, rec)
	}
	if more {
		next := after
		if lastMember != "" {
			n, err := strconv.ParseFloat(lastScore, 64)
			if err != nil {
				return ListPage{}, s.ReplyError("last_score %q is not a number", lastScore)
			}
			next = &Cursor{Score: int64(n), Member: lastMember}
		}
		page.Next = next
	}
	return page, nil
}

// listRow reads row i, {id, score, {field, value...}}, as a Record.
func listRow(s *lua.Script, tenant string, row any, i int) (Record, error) {
	r, err := s.Array(row, 3, 3)
	if err != nil {
		return Record{}, err
	}
	id, err := s.String(r[0], fmt.Sprintf("row %d id", i+1))
	if err != nil {
		return Record{}, err
	}
	fields, err := s.Strings(r[2])
	if err != nil {
		return Record{}, err
	}
	if len(fields)%2 != 0 {
		return Record{}, s.ReplyError("row %d has %d hash elements, want pairs", i+1, len(fields))
	}
	h := make(map[string]string, len(fields)/2)
	for j := 0; j < len(fields); j += 2 {
		h[fields[j]] = fields[j+1]
	}
	rec := Record{JobID: id, Tenant: tenant, Ahead: -1}
	rec.fill(h)
	return rec, nil
}
