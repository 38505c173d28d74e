package lua

import "sync"

var (
	submitOnce    sync.Once
	submitScript  *Script
	submitSingles map[string]*Script
)

// submitParts are the modules after admitParts that submit.lua needs: the
// job state helpers and the enqueue.
var submitParts = []string{"job_state_final.lua", "enqueue_jobs.lua"}

// Submit returns "submit.lua": admission (the prelude, every algorithm
// module and admit_decide.lua, as Admit) and the Redis backend's enqueue
// (job_state_final.lua, enqueue_jobs.lua, as Enqueue) in one script, so one
// EVALSHA admits and enqueues one or many requests, each all or nothing.
// Its KEYS, ARGV and reply are described in the header of submit.lua. Built
// once; it panics only when an embedded file is missing, which any test
// catches.
func Submit() *Script {
	submitOnce.Do(buildSubmit)
	return submitScript
}

// SubmitFor returns submit.lua with one algorithm module (module, the file
// name of an AdmitModules entry), as AdmitFor is to Admit, or nil for an
// unknown module.
func SubmitFor(module string) *Script {
	submitOnce.Do(buildSubmit)
	return submitSingles[module]
}

func buildSubmit() {
	submitScript = register(include("submit.lua", append(admitParts(""), submitParts...)...))
	submitSingles = make(map[string]*Script, len(AdmitModules))
	for _, m := range AdmitModules {
		parts := append(append(admitParts(m), submitParts...), "submit.lua")
		submitSingles[m] = register(New("submit.lua("+m+")", concat(parts)))
	}
}
