// Package ui holds sluice's web console: static files (HTML, CSS and plain
// JavaScript, no build step, no third-party code) embedded in the binary
// and served by ingest at /ui/ (ingest/ui.go). The page itself is public;
// every figure it shows comes from the admin and visibility APIs, called
// with the admin token the operator types in, kept in the tab's
// sessionStorage and sent only as "Authorization: Bearer".
package ui

import (
	"embed"
	"io/fs"
)

//go:embed static
var static embed.FS

// Files returns the console's files: index.html, app.js, chart.js,
// app.css and favicon.svg at its root.
func Files() fs.FS {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // "static" is embedded above; fs.Sub fails only on a bad name
	}
	return sub
}
