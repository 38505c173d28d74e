// Package consoletest holds the web console's real-browser test: it runs
// ingest and a drainer (built from cmd/) on a Redis of its own, with the
// demo sink (internal/demosink) in the test, and drives Debian's chromium
// through the Chrome DevTools Protocol (github.com/chromedp/chromedp): it
// logs in through the form, watches the live numbers, changes a rate,
// pauses and resumes a tenant, redrives a dead job and looks a job up, and
// fails on any console error or exception. With
// SLUICE_CONSOLE_SCREENSHOTS=1 the Redis run saves its screenshots to
// docs/screenshots/, which README shows (a plain run leaves the tree as it
// is); SLUICE_CONSOLE_WARMUP (a Go duration) lets the stack run that long
// first, so the charts show more than the test's first seconds.
//
// Without chromium on PATH the test is skipped with a message, unless CI is
// "true": in CI it must run (deploy/local/services.sh tools installs it).
package consoletest
