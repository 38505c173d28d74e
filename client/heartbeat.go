package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"time"
)

// StateScheduled is the state of a job submitted with NotBefore or Delay
// until it is due.
const StateScheduled = "scheduled"

// JobHeartbeat is a heartbeat job's interval and beats, in JobStatus.
type JobHeartbeat struct {
	// Interval is the heartbeat interval as a Go duration ("30s").
	Interval string `json:"interval"`
	// LastBeat is the last poll (before the first: the enqueue, or a
	// scheduled job's due time); ExpiresAt is LastBeat + Interval.
	LastBeat  time.Time `json:"last_beat"`
	ExpiresAt time.Time `json:"expires_at"`
}

// MarshalJSON writes the job as the server reads it: Delay and Heartbeat
// as Go duration strings, left out when zero.
func (j Job) MarshalJSON() ([]byte, error) {
	type plain Job
	out := struct {
		plain
		Delay     string `json:"delay,omitempty"`
		Heartbeat string `json:"heartbeat,omitempty"`
	}{plain: plain(j)}
	if j.Delay != 0 {
		out.Delay = j.Delay.String()
	}
	if j.Heartbeat != 0 {
		out.Heartbeat = j.Heartbeat.String()
	}
	return json.Marshal(out)
}

// Heartbeat polls one of the tenant's heartbeat jobs (POST
// /v1/jobs/{id}:heartbeat), keeping it wanted, and returns its state. A job
// submitted without Heartbeat is an *Error with Status 409.
func (c *Client) Heartbeat(ctx context.Context, id string) (JobStatus, error) {
	var js JobStatus
	err := c.do(ctx, http.MethodPost, jobPath(id)+":heartbeat", nil, &js)
	return js, err
}

// Heartbeat polls a heartbeat job of tenant ("" looks the id up in every
// tenant), as Client.Heartbeat.
func (a *Admin) Heartbeat(ctx context.Context, tenant, id string) (JobStatus, error) {
	var js JobStatus
	path := jobPath(id) + ":heartbeat"
	if tenant != "" {
		path += "?tenant=" + url.QueryEscape(tenant)
	}
	err := a.c.do(ctx, http.MethodPost, path, nil, &js)
	return js, err
}
