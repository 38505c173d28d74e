package lua

import (
	"fmt"
	"strings"
	"sync"
)

// AdmitModules are the algorithm modules of the admission script, in the
// order Admit concatenates them between the prelude admit_prelude.lua and the
// driver admit.lua. Each defines two local functions, <alg>_check and
// <alg>_commit; see the header of fixed_window.lua.
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
	singleOnce  sync.Once
	singles     map[string]*Script
)

// Admit returns the admission script "admit.lua": the prelude
// admit_prelude.lua (the locals every part uses), the five algorithm modules
// (AdmitModules) and the driver admit.lua, as one script, so one
// EVALSHA checks a tenant's backlog gate and all its policies and writes
// their state only when all admit. Its KEYS, ARGV and reply are described in
// the header of admit.lua. The script is built once; it panics only when an
// embedded file is missing, which any test catches.
func Admit() *Script {
	admitOnce.Do(func() {
		admitScript = register(include("admit.lua", admitParts("")...))
	})
	return admitScript
}

// AdmitFor returns the admission script for requests whose policies all use
// one algorithm (module, the file name of an AdmitModules entry, such as
// "gcra.lua"): the prelude, that module and the same driver admit.lua, with the
// same KEYS, ARGV and reply as Admit. Redis then defines one module's
// functions per call instead of five, which is most of a small decision's
// server time. It returns nil for an unknown module.
func AdmitFor(module string) *Script {
	singleOnce.Do(func() {
		singles = make(map[string]*Script, len(AdmitModules))
		for _, m := range AdmitModules {
			singles[m] = register(New("admit.lua("+m+")", concat(append(admitParts(m), "admit.lua"))))
		}
	})
	return singles[module]
}

// admitParts are the modules before an admission driver: num.lua (the
// argument parser), the prelude, the algorithm module (every one of
// AdmitModules when module is "") and the decisions admit_decide.lua.
func admitParts(module string) []string {
	parts := []string{"num.lua", "admit_prelude.lua"}
	if module == "" {
		parts = append(parts, AdmitModules...)
	} else {
		parts = append(parts, module)
	}
	return append(parts, "admit_decide.lua")
}

// concat joins the embedded files names into one script's source, each
// module with a generated prelude (preludes) after that prelude.
func concat(names []string) string {
	var b strings.Builder
	for _, name := range names {
		if gen, ok := preludes[name]; ok {
			b.WriteString(gen())
		}
		src, err := Source(name)
		if err != nil {
			panic(fmt.Sprintf("lua: admit: %v", err))
		}
		b.WriteString(src)
		b.WriteString("\n")
	}
	return b.String()
}
