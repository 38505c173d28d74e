package lua

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testenv"
)

// TestNumIsTonumber: num.lua's memoized num(s) answers exactly as tonumber(s)
// for numbers, non-numbers and nil, on the first call and when the same
// string comes again from the cache (a non-number is cached as false and
// still answers nil). strtod reads "nan" and "inf" too, and so do both.
func TestNumIsTonumber(t *testing.T) {
	src, err := Source("num.lua")
	if err != nil {
		t.Fatal(err)
	}
	// For every argument, twice (the second from the cache), and for nil:
	// whether num and tonumber agree, as "ok" or the two answers.
	s := New("num_test", src+`
local out = {}
local function same(a, b)
  if a == b or (a ~= a and b ~= b) then return 'ok' end -- both NaN
  return tostring(a) .. ' vs ' .. tostring(b)
end
for round = 1, 2 do
  for i = 1, #ARGV do
    out[#out + 1] = same(num(ARGV[i]), tonumber(ARGV[i]))
  end
end
out[#out + 1] = same(num(nil), tonumber(nil))
out[#out + 1] = same(num(ARGV[#ARGV + 1]), nil)
return out
`)
	args := []any{"1", "0", "-0", "604800000", "9007199254740991", "1.5", "1e3", "0x10", " 7", "", "abc", "1a", "nan", "inf", "{\"v\":1}"}
	rdb := testenv.Redis(t)
	got, err := s.Run(context.Background(), rdb, nil, args...).StringSlice()
	if err != nil {
		t.Fatal(err)
	}
	if want := 2*len(args) + 2; len(got) != want {
		t.Fatalf("%d answers, want %d", len(got), want)
	}
	for i, g := range got {
		if g != "ok" {
			what := "nil"
			if i < 2*len(args) {
				what = fmt.Sprint(args[i%len(args)])
			}
			t.Errorf("num(%q) differs from tonumber: %s", what, g)
		}
	}
}

// numCall is a call of num, not of a function whose name ends in num.
var numCall = regexp.MustCompile(`(^|[^\w.:])num\(`)

// TestNumIncludedBeforeUse: every registered script (the admission and
// submit variants of every algorithm included) that calls num has num.lua
// before its first call. SCRIPT LOAD only compiles a script, and Redis
// raises an error on reading an undefined global only when the call runs,
// so a script that includes a module using num without num.lua would pass
// TestLoadAll.
func TestNumIncludedBeforeUse(t *testing.T) {
	for _, m := range AdmitModules {
		AdmitFor(m)
		SubmitFor(m)
	}
	users := 0
	for _, s := range All() {
		src := s.Src()
		loc := numCall.FindStringIndex(src)
		if loc == nil {
			continue
		}
		users++
		at := strings.Index(src, "-- num.lua:")
		if at < 0 || at > loc[0] {
			t.Errorf("%s calls num at byte %d, but num.lua is at %d (want before)", s.Name(), loc[0], at)
		}
	}
	if users == 0 {
		t.Fatal("no registered script calls num: the pattern is out of date")
	}
}
