package stack_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/countersign/countersign/cmd/stack"
	"github.com/countersign/countersign/sidecar/authn"
)

// A production sidecar tells an MCP client where to get a token: /mcp's
// OAuth protected resource metadata (RFC 9728) names /mcp under the public
// URL and the trusted issuers that are URLs, and a 401 on /mcp points to
// it; a 401 elsewhere does not.
func TestProtectedResourceMetadata(t *testing.T) {
	o := production(t)
	keys := o.Issuers[0].Keys
	o.Issuers = []authn.Issuer{{Name: "https://idp.example.com", Keys: keys}, {Name: "legacy-idp", Keys: keys}}
	o.PublicURL = "https://countersign.example.com/"
	st, err := stack.Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	for _, path := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"} {
		checkResourceMetadata(t, st.URL+path)
	}

	for path, want := range map[string]string{
		"/mcp":      `Bearer realm="countersign", resource_metadata="https://countersign.example.com/.well-known/oauth-protected-resource"`,
		"/v1/tools": `Bearer realm="countersign"`,
	} {
		req, _ := http.NewRequest(http.MethodPost, st.URL+path, strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if got := res.Header.Get("WWW-Authenticate"); res.StatusCode != http.StatusUnauthorized || got != want {
			t.Errorf("POST %s without a token: %d, WWW-Authenticate %q; want 401, %q", path, res.StatusCode, got, want)
		}
	}
}

// A public URL that is not a base URL is refused with the way to write it.
func TestPublicURLRefused(t *testing.T) {
	for _, v := range []string{"countersign.example.com", "ftp://countersign.example.com", "https://countersign.example.com/?x=1", "https://u:p@countersign.example.com"} {
		o := production(t)
		o.PublicURL = v
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "PublicURL") || !strings.Contains(err.Error(), "write it like https://") {
			t.Errorf("PublicURL %q: %v", v, err)
		}
	}
}

// checkResourceMetadata checks the protected resource metadata served at url.
func checkResourceMetadata(t *testing.T, url string) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var doc struct {
		Resource               string   `json:"resource"`
		AuthorizationServers   []string `json:"authorization_servers"`
		BearerMethodsSupported []string `json:"bearer_methods_supported"`
		ResourceName           string   `json:"resource_name"`
	}
	dec := json.NewDecoder(res.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil || res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("status %d %s: %+v, %v", res.StatusCode, res.Header.Get("Content-Type"), doc, err)
	}
	if doc.Resource != "https://countersign.example.com/mcp" || strings.Join(doc.AuthorizationServers, " ") != "https://idp.example.com" ||
		strings.Join(doc.BearerMethodsSupported, " ") != "header" || doc.ResourceName == "" {
		t.Errorf("metadata %+v: want /mcp under the public URL, the issuer that is a URL, bearer in the header", doc)
	}
}
