package dlq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
)

// Page sizes of List.
const (
	// PageDefault is the page size when none is asked for.
	PageDefault = 50
	// PageMax is the largest page: a page is at most PageMax ×
	// MaxRecordBytes of records read.
	PageMax = 100
)

// ErrNotFound is returned by Get for a job that is not in the tenant's
// dead letters.
var ErrNotFound = errors.New("dlq: no such dead letter")

// ErrBadCursor is returned by List for a cursor it did not hand out.
var ErrBadCursor = errors.New("dlq: invalid cursor")

// Store reads, redrives and deletes the dead letters of every tenant. It is
// safe for concurrent use.
type Store struct {
	rdb      redis.UniversalClient
	producer queue.Producer
	clock    clock.Clock
}

// Config configures a Store.
type Config struct {
	// Redis holds the dead letters (the tenants' Redis). Required.
	Redis redis.UniversalClient
	// Producer is the queue a redrive enqueues onto (ingest's, the
	// configured backend). Required.
	Producer queue.Producer
	// Clock stamps a redriven job's enqueued_at; nil is clock.Real.
	Clock clock.Clock
}

// New returns a Store. The only errors are a missing Redis or Producer.
func New(cfg Config) (*Store, error) {
	switch {
	case cfg.Redis == nil:
		return nil, errors.New("dlq: new store: Redis is required")
	case cfg.Producer == nil:
		return nil, errors.New("dlq: new store: Producer is required")
	}
	return &Store{rdb: cfg.Redis, producer: cfg.Producer, clock: clock.Or(cfg.Clock)}, nil
}

// Item is one dead letter in a listing.
type Item struct {
	JobID string `json:"job_id"`
	// Type is the job's type ("" for a poison job).
	Type string `json:"type"`
	// Reason says why the job is dead: rejected, attempts_exhausted,
	// poison, cost_exceeds_capacity.
	Reason string `json:"reason"`
	// Status is the sink's last HTTP status (0 when none).
	Status int `json:"status"`
	// Attempts is how many deliveries were tried.
	Attempts int `json:"attempts"`
	// FailedAt is when the job died.
	FailedAt time.Time `json:"failed_at"`
	// LastError is the last delivery error.
	LastError string `json:"last_error"`
	// Excerpt is the payload's JSON text, cut to ExcerptBytes on a UTF-8
	// boundary; ExcerptTruncated says it was cut.
	Excerpt          string `json:"excerpt"`
	ExcerptTruncated bool   `json:"excerpt_truncated"`
	// Truncated says the stored record was cut to MaxRecordBytes: the
	// payload is not kept whole and the job cannot be redriven.
	Truncated bool `json:"truncated"`
}

// Letter is one dead letter in full.
type Letter struct {
	Item
	// Payload is the job's payload (null when it was not kept: a poison or
	// truncated record).
	Payload json.RawMessage `json:"payload"`
	// Response is the start of the sink's last response body.
	Response string `json:"response"`
}

// letterOf builds the Letter of job id, which died at ms, from its record.
func letterOf(id string, ms int64, rec string) Letter {
	l := Letter{Item: Item{JobID: id, FailedAt: time.UnixMilli(ms).UTC()}}
	st, ok := decodeStored(rec)
	if !ok {
		return l
	}
	l.Type, l.Reason, l.Status, l.Attempts = st.jobType(), st.Reason, st.Status, st.Attempts
	l.LastError, l.Truncated, l.Response = st.Error, st.Truncated, st.Response
	l.Payload, l.Excerpt, l.ExcerptTruncated = st.payload()
	return l
}

// Page is one page of a tenant's dead letters, newest first.
type Page struct {
	Items []Item
	// Next is the cursor of the next page, "" when there is none.
	Next string
}

// List returns a page of tenant's dead letters, newest first: at most limit
// (0 is PageDefault; more than PageMax is PageMax) after cursor ("" for the
// newest). The cursor is the last item's (failed_at, job id), so dead jobs
// that arrive or leave meanwhile neither shift nor repeat items. One round
// trip (lua/dlq_page.lua).
func (s *Store) List(ctx context.Context, tenant string, limit int, cursor string) (Page, error) {
	if limit <= 0 {
		limit = PageDefault
	}
	limit = min(limit, PageMax)
	var score, member string
	if cursor != "" {
		// One cursor shape for every listing: the last item's (score, id).
		c, err := jobstate.ParseCursor(cursor)
		if err != nil {
			return Page{}, ErrBadCursor
		}
		score, member = scoreString(c.Score), c.Member
	}
	v, err := pageCall(tenant, limit+1, score, member).Run(ctx, s.rdb).Result()
	if err != nil {
		return Page{}, fmt.Errorf("dlq: list %s: %w", tenant, err)
	}
	ents, err := parsePage(v)
	if err != nil {
		return Page{}, fmt.Errorf("dlq: list %s: %w", tenant, err)
	}
	p := Page{Items: make([]Item, 0, min(len(ents), limit))}
	for i, e := range ents {
		if i == limit {
			last := ents[limit-1]
			p.Next = jobstate.Cursor{Score: last.score, Member: last.id}.String()
			break
		}
		p.Items = append(p.Items, letterOf(e.id, e.score, e.rec).Item)
	}
	return p, nil
}

// Get returns tenant's dead letter of job id, or ErrNotFound.
func (s *Store) Get(ctx context.Context, tenant, id string) (Letter, error) {
	pipe := s.rdb.Pipeline()
	sc := pipe.ZScore(ctx, keys.JobIndex(tenant, "dead"), id)
	rec := pipe.HGet(ctx, keys.DeadRecords(tenant), id)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return Letter{}, fmt.Errorf("dlq: get %s/%s: %w", tenant, id, err)
	}
	if rec.Err() != nil || sc.Err() != nil {
		return Letter{}, fmt.Errorf("dlq: get %s/%s: %w", tenant, id, ErrNotFound)
	}
	return letterOf(id, int64(sc.Val()), rec.Val()), nil
}

// Letters returns every dead letter of tenant as stored, oldest first (for
// tests and tools; a letter that does not decode is left out).
func Letters(ctx context.Context, rdb redis.UniversalClient, tenant string) ([]Stored, error) {
	ids, err := rdb.ZRange(ctx, keys.JobIndex(tenant, "dead"), 0, -1).Result()
	if err != nil || len(ids) == 0 {
		return nil, wrapErr("read", tenant, err)
	}
	recs, err := rdb.HMGet(ctx, keys.DeadRecords(tenant), ids...).Result()
	if err != nil {
		return nil, fmt.Errorf("dlq: read %s: %w", tenant, err)
	}
	out := make([]Stored, 0, len(recs))
	for _, v := range recs {
		if s, ok := v.(string); ok {
			if st, ok := decodeStored(s); ok {
				out = append(out, st)
			}
		}
	}
	return out, nil
}
