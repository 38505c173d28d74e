package lua

import (
	"fmt"
	"strings"
	"sync"
)

// AdmitModules are the algorithm modules of the admission script, in the
// order Admit concatenates them before the driver admit.lua. Each defines one
// Lua table (named like its file) with check and commit functions; see the
// header of each file.
var AdmitModules = []string{
	"fixed_window.lua",
	"sliding_window.lua",
	"gcra.lua",
	"token_bucket.lua",
	"sliding_log.lua",
}

var (
	admitOnce   sync.Once
	admitScript *Script
)

// Admit returns the admission script "admit.lua": the five algorithm modules
// (AdmitModules) followed by the driver admit.lua, as one script, so one
// EVALSHA checks a tenant's backlog gate and all its policies and writes
// their state only when all admit. Its KEYS, ARGV and reply are described in
// the header of admit.lua. The script is built once; it panics only when an
// embedded file is missing, which any test catches.
func Admit() *Script {
	admitOnce.Do(func() {
		var b strings.Builder
		for _, name := range append(AdmitModules[:len(AdmitModules):len(AdmitModules)], "admit.lua") {
			src, err := Source(name)
			if err != nil {
				panic(fmt.Sprintf("lua: admit: %v", err))
			}
			b.WriteString(src)
			b.WriteString("\n")
		}
		admitScript = New("admit.lua", b.String())
	})
	return admitScript
}
