package mcpfront_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/countersign/countersign/cmd/devstack"
)

// A client that meets /mcp without a token finds where to get one, as the
// MCP authorization specification has it: the 401's challenge names the
// protected resource metadata, whose resource is /mcp as the client
// reached it. Without --public-url that is the request's own scheme and
// Host. The dev identity provider is no OAuth server, so none is named.
func TestMCPUnauthorizedPointsToResourceMetadata(t *testing.T) {
	st := start(t, devstack.Options{})
	for _, host := range []string{"", "countersign.test:8443"} {
		t.Run("host "+host, func(t *testing.T) {
			base := st.Endpoints.Sidecar
			if host != "" {
				base = "http://" + host
			}
			req, _ := http.NewRequest(http.MethodPost, st.Endpoints.Sidecar+"/mcp",
				strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Host = host
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			challenge := res.Header.Get("WWW-Authenticate")
			m := regexp.MustCompile(`^Bearer realm="countersign", resource_metadata="([^"]+)"$`).FindStringSubmatch(challenge)
			if res.StatusCode != http.StatusUnauthorized || m == nil || m[1] != base+"/.well-known/oauth-protected-resource" {
				t.Fatalf("%d, WWW-Authenticate %q; want 401 naming %s/.well-known/oauth-protected-resource", res.StatusCode, challenge, base)
			}

			// Fetch the document the challenge names, on the socket the
			// client used.
			req, _ = http.NewRequest(http.MethodGet, st.Endpoints.Sidecar+strings.TrimPrefix(m[1], base), nil)
			req.Host = host
			res, err = http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			var doc map[string]any
			jsonDecode(t, res, &doc)
			if res.StatusCode != http.StatusOK || doc["resource"] != base+"/mcp" || doc["authorization_servers"] != nil {
				t.Errorf("status %d, metadata %v; want resource %s/mcp and no authorization server", res.StatusCode, doc, base)
			}
			if methods, _ := doc["bearer_methods_supported"].([]any); len(methods) != 1 || methods[0] != "header" {
				t.Errorf("bearer_methods_supported %v, want [header]", doc["bearer_methods_supported"])
			}
		})
	}
}
