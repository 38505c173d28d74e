package kafkaq

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/sluicehq/sluice/keys"
)

// A drainer killed without leaving the group (SIGKILL, OOM) stays a member
// until its session times out, and with kafka-go's eager protocol the
// restarted process's join holds the whole group's rebalance until then:
// every partition stops for about SessionTimeout. When ConsumerConfig.Instance
// names the drainer instance (stable across its restarts), each process
// records its member id in Redis (keys.KafkaMember), refreshed every
// memberRefresh; a restarted instance that finds a record of another process
// which stays unchanged for memberStale removes that member from the group
// (LeaveGroup on its behalf) before joining, so the rebalance completes as
// soon as the live members rejoin. A record that changes meanwhile belongs to
// a live process using the same instance name: it is left alone, and this
// process records nothing (it then waits out sessions as before).
const (
	memberRefresh = 250 * time.Millisecond
	memberStale   = 1500 * time.Millisecond
)

// memberRecord is one process's claim on an instance name.
type memberRecord struct {
	key, token string
	member     atomic.Pointer[string] // the current generation's member id
	off        atomic.Bool            // another live process uses the name
}

func newMemberRecord(group, instance string) *memberRecord {
	if instance == "" {
		return nil
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return &memberRecord{key: keys.KafkaMember(group, instance), token: hex.EncodeToString(b)}
}

// parseMember splits a record value: token, unix ms, member id.
func parseMember(v string) (token, member string, ok bool) {
	f := strings.SplitN(v, " ", 3)
	if len(f) != 3 || f[0] == "" || f[2] == "" {
		return "", "", false
	}
	if _, err := strconv.ParseInt(f[1], 10, 64); err != nil {
		return "", "", false
	}
	return f[0], f[2], true
}

// removePredecessor removes the member of this instance's previous process
// from the group when its record is stale (see above). It waits memberStale
// when there is a record of another process, and never fails the start: an
// error is logged and the session timeout then applies.
func (c *Consumer) removePredecessor(ctx context.Context) {
	r := c.member
	if r == nil || c.rdb == nil {
		return
	}
	first, err := c.rdb.Get(ctx, r.key).Result()
	if errors.Is(err, redis.Nil) {
		return
	}
	if err != nil {
		c.log.Warn("kafka consumer: read the previous member of this instance", "key", r.key, "err", err)
		return
	}
	_, member, ok := parseMember(first)
	if !ok {
		c.log.Warn("kafka consumer: ignoring a malformed member record", "key", r.key, "value", first)
		return
	}
	start := time.Now()
	sleepCtx(ctx, memberStale)
	again, err := c.rdb.Get(ctx, r.key).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return // its process left the group cleanly meanwhile
	case err != nil:
		c.log.Warn("kafka consumer: read the previous member of this instance", "key", r.key, "err", err)
		return
	case again != first:
		r.off.Store(true)
		c.log.Warn("kafka consumer: another live drainer uses this instance name; not recording this member",
			"key", r.key)
		return
	}
	removed, err := c.leaveFor(ctx, member)
	switch {
	case err != nil:
		c.log.Warn("kafka consumer: remove the previous member of this instance; its session will time out",
			"member", member, "err", err)
	case !removed:
		c.log.Debug("kafka consumer: the previous member of this instance had already left the group", "member", member)
	default:
		c.m.predecessors.Inc()
		c.log.Info("kafka consumer: removed the previous member of this instance from the group",
			"member", member, "waited", time.Since(start).Round(time.Millisecond).String())
	}
}

// leaveAttempts is how many LeaveGroup requests leaveFor sends at most, all
// within one callTimeout.
const leaveAttempts = 3

// leaveFor sends LeaveGroup on behalf of member: removed reports that the
// broker removed it; a member the group no longer knows (UnknownMemberId)
// is not removed and not an error. A coordinator moving or loading
// (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE)
// or a network error is retried, up to leaveAttempts within callTimeout.
func (c *Consumer) leaveFor(ctx context.Context, member string) (removed bool, err error) {
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	for attempt := 1; ; attempt++ {
		removed, err = c.leaveOnce(cctx, member)
		if err == nil || attempt == leaveAttempts || !leaveRetryable(err) || cctx.Err() != nil {
			return removed, err
		}
		sleepCtx(cctx, time.Duration(attempt)*200*time.Millisecond)
	}
}

// leaveOnce is one LeaveGroup of leaveFor.
func (c *Consumer) leaveOnce(ctx context.Context, member string) (bool, error) {
	res, err := c.client.LeaveGroup(ctx, &kafka.LeaveGroupRequest{
		GroupID: c.cfg.Kafka.ConsumerGroup, Members: []kafka.LeaveGroupRequestMember{{ID: member}},
	})
	if err != nil {
		return false, err
	}
	if errors.Is(res.Error, kafka.UnknownMemberId) {
		return false, nil
	}
	if res.Error != nil {
		return false, res.Error
	}
	// A LeaveGroup before v3 answers no member list: no error is removed.
	removed := len(res.Members) == 0
	for _, m := range res.Members {
		switch {
		case m.Error == nil:
			removed = removed || m.ID == member
		case errors.Is(m.Error, kafka.UnknownMemberId):
		default:
			return false, fmt.Errorf("member %s: %w", m.ID, m.Error)
		}
	}
	return removed, nil
}

// leaveRetryable reports whether a LeaveGroup error may pass on a retry:
// the group's coordinator moving or loading, or the network (not the
// caller's context ending).
func leaveRetryable(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var ke kafka.Error
	if errors.As(err, &ke) {
		return ke == kafka.NotCoordinatorForGroup || ke == kafka.GroupLoadInProgress ||
			ke == kafka.GroupCoordinatorNotAvailable || ke == kafka.NetworkException || ke == kafka.RequestTimedOut
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNREFUSED)
}

// keepMemberRecord writes this process's member id every memberRefresh
// until ctx ends, then deletes the record (a clean stop leaves the group
// itself). A failed write is retried on the next tick.
func (c *Consumer) keepMemberRecord(ctx context.Context) {
	r := c.member
	if r == nil || c.rdb == nil {
		return
	}
	tick := time.NewTicker(memberRefresh)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			if !r.off.Load() && r.member.Load() != nil {
				dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
				defer cancel()
				_ = c.rdb.Del(dctx, r.key).Err()
			}
			return
		case <-tick.C:
		}
		m := r.member.Load()
		if r.off.Load() || m == nil {
			continue
		}
		v := r.token + " " + strconv.FormatInt(time.Now().UnixMilli(), 10) + " " + *m
		wctx, cancel := context.WithTimeout(ctx, callTimeout)
		_ = c.rdb.Set(wctx, r.key, v, keys.MemberTTL).Err()
		cancel()
	}
}
