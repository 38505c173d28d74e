// Package lua is the one home of sluice's Redis Lua scripts: it embeds the
// .lua files, registers every script once (registry.go: the Script values
// callers use, and LoadAll, which each service runs at start-up), and owns
// the one way to call a script: a Call value (script, keys, args) run alone
// (Call.Run) or with others in one pipeline (Exec, Group), under one
// NOSCRIPT rule: EVALSHA, and a call Redis answers NOSCRIPT (restarted,
// flushed, failed over) is sent once more as EVAL, which loads the script
// on that node.
//
// Every script opens with a header listing its KEYS, ARGV and return value.
// Each caller keeps a typed Go twin of its scripts: a function or type
// building the Call from named arguments, and a parser of the reply that
// checks its shape and types (reply.go has the shared checks).
package lua

import (
	"context"
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

//go:embed *.lua
var files embed.FS

// Script is one embedded Lua script.
type Script struct {
	name    string
	src     string
	sha     string
	reloads atomic.Uint64
}

// New returns a Script from source text; name is used in error messages.
func New(name, src string) *Script {
	sum := sha1.Sum([]byte(src))
	return &Script{name: name, src: src, sha: hex.EncodeToString(sum[:])}
}

// mustLoad returns the embedded script file name (e.g. "gcra.lua"). It panics
// when the file does not exist, which is a programming error caught by any test.
func mustLoad(name string) *Script {
	b, err := files.ReadFile(name)
	if err != nil {
		panic(fmt.Sprintf("lua: no embedded script %q", name))
	}
	return New(name, string(b))
}

// include returns the embedded script name run after the embedded modules
// (files that only define local functions for it, such as
// "job_state_final.lua"), as one script named name. It panics when a file
// does not exist, as mustLoad does.
func include(name string, modules ...string) *Script {
	return New(name, concat(append(modules[:len(modules):len(modules)], name)))
}

// Source returns the text of the embedded file name, or an error.
func Source(name string) (string, error) {
	b, err := files.ReadFile(name)
	if err != nil {
		return "", fmt.Errorf("lua: no embedded script %q: %w", name, err)
	}
	return string(b), nil
}

// Names lists the embedded script files.
func Names() []string {
	ents, _ := fs.ReadDir(files, ".")
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

// Name returns the script's name.
func (s *Script) Name() string { return s.name }

// SHA returns the script's SHA1, as EVALSHA takes it.
func (s *Script) SHA() string { return s.sha }

// Src returns the script's source.
func (s *Script) Src() string { return s.src }

// Load runs SCRIPT LOAD for the script, on every master when rdb is a
// *redis.ClusterClient. A script that Redis refuses (a syntax error) returns
// an error naming the script, so a service stops at start-up.
func (s *Script) Load(ctx context.Context, rdb redis.UniversalClient) error {
	load := func(ctx context.Context, c *redis.Client) error {
		sha, err := c.ScriptLoad(ctx, s.src).Result()
		if err != nil {
			return fmt.Errorf("lua: load %s: %w", s.name, err)
		}
		if sha != s.sha {
			return fmt.Errorf("lua: load %s: redis returned sha %s, want %s", s.name, sha, s.sha)
		}
		return nil
	}
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, load)
	case *redis.Client:
		return load(ctx, c)
	default:
		if err := rdb.ScriptLoad(ctx, s.src).Err(); err != nil {
			return fmt.Errorf("lua: load %s: %w", s.name, err)
		}
		return nil
	}
}

// Reloads counts the calls of the script that Redis answered NOSCRIPT and
// that were therefore sent again as EVAL.
func (s *Script) Reloads() uint64 { return s.reloads.Load() }

// Run is Call{s, keys, args}.Run: one EVALSHA, sent again as EVAL on
// NOSCRIPT.
func (s *Script) Run(ctx context.Context, rdb redis.Scripter, keys []string, args ...any) *redis.Cmd {
	return Call{Script: s, Keys: keys, Args: args}.Run(ctx, rdb)
}

// IsNoScript reports whether err is Redis' NOSCRIPT error.
func IsNoScript(err error) bool {
	if err == nil {
		return false // before errors.As: its target escapes, an allocation per reply
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		return strings.HasPrefix(rerr.Error(), "NOSCRIPT")
	}
	return strings.HasPrefix(err.Error(), "NOSCRIPT")
}
