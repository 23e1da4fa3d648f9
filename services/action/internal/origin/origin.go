// Package origin holds the one rule by which the action stage's HTTP tools (REST tools and
// remote MCP servers) keep a tool's configured headers, its credentials, with the server they
// were configured for.
package origin

import (
	"net/url"
	"strings"
)

// Same reports whether u is on the scheme and host (with port) of origin, or on its host
// upgraded from http to https: where a redirect may take a tool's configured headers.
func Same(u, origin *url.URL) bool {
	upgraded := origin.Scheme == "http" && u.Scheme == "https"
	return strings.EqualFold(u.Host, origin.Host) && (u.Scheme == origin.Scheme || upgraded)
}
