package sidecar

import (
	_ "embed"
	"net/http"
	"regexp"
	"sort"
	"strings"

	"github.com/labstack/echo/v4"
)

// openAPI is the HTTP contract, an OpenAPI 3.1 document, served as it is
// at /openapi.json. A test holds it and the routes to each other.
//
//go:embed openapi.json
var openAPI []byte

func (s *Server) openapi(c echo.Context) error {
	return c.Blob(http.StatusOK, "application/json", openAPI)
}

var echoParam = regexp.MustCompile(`:([a-z]+)`)

// Routes lists the server's routes as "METHOD /path", with path parameters
// written {name} as OpenAPI writes them.
func (s *Server) Routes() []string {
	var out []string
	for _, r := range s.echo.Routes() {
		if strings.HasSuffix(r.Path, "/*") || r.Method == "echo_route_not_found" {
			continue
		}
		out = append(out, r.Method+" "+echoParam.ReplaceAllString(r.Path, "{$1}"))
	}
	sort.Strings(out)
	return out
}
