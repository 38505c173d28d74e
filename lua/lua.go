// Package lua embeds sluice's Redis Lua scripts, one .lua file per script, and
// runs them by SHA with a reload when Redis answers NOSCRIPT.
//
// Every script opens with a header listing its KEYS, ARGV and return value.
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

	"github.com/redis/go-redis/v9"
)

//go:embed *.lua
var files embed.FS

// Script is one embedded Lua script.
type Script struct {
	name string
	src  string
	sha  string
}

// New returns a Script from source text; name is used in error messages.
func New(name, src string) *Script {
	sum := sha1.Sum([]byte(src))
	return &Script{name: name, src: src, sha: hex.EncodeToString(sum[:])}
}

// MustLoad returns the embedded script file name (e.g. "gcra.lua"). It panics
// when the file does not exist, which is a programming error caught by any test.
func MustLoad(name string) *Script {
	b, err := files.ReadFile(name)
	if err != nil {
		panic(fmt.Sprintf("lua: no embedded script %q", name))
	}
	return New(name, string(b))
}

// Include returns the embedded script name run after the embedded modules
// (files that only define local functions for it, such as
// "job_state_final.lua"), as one script named name. It panics when a file
// does not exist, as MustLoad does.
func Include(name string, modules ...string) *Script {
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

// Run runs the script with EVALSHA. When Redis answers NOSCRIPT (restarted,
// flushed, failed over) it loads the script again and retries once, so the
// caller never sees NOSCRIPT.
func (s *Script) Run(ctx context.Context, rdb redis.Scripter, keys []string, args ...any) *redis.Cmd {
	cmd := rdb.EvalSha(ctx, s.sha, keys, args...)
	if IsNoScript(cmd.Err()) {
		// EVAL loads the script into the script cache as a side effect, on the
		// node that owns keys[0], so later EVALSHAs find it again.
		return rdb.Eval(ctx, s.src, keys, args...)
	}
	return cmd
}

// IsNoScript reports whether err is Redis' NOSCRIPT error.
func IsNoScript(err error) bool {
	var rerr redis.Error
	if errors.As(err, &rerr) {
		return strings.HasPrefix(rerr.Error(), "NOSCRIPT")
	}
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}
