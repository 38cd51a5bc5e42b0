package sidecar

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/countersign/countersign/sidecar/leadpage"
)

// leadPage is the lead's approval page (HTML), over the same engine calls,
// token verification and error codes as the API.
func (s *Server) leadPage() *leadpage.Page {
	return leadpage.New(leadpage.Options{
		Approvals: s.opts.Engine, Auth: s.opts.Auth, DevLogins: s.opts.DevLogins,
		SignIn: s.opts.SignIn, PasteTokens: s.opts.PasteTokens,
		Clock: s.opts.Clock, Logger: s.opts.Logger, Sessions: s.opts.PageSessions,
		Explain: func(err error) leadpage.Refusal {
			ae := classify(err)
			return leadpage.Refusal{Status: ae.Status, Code: ae.Code, Message: ae.Message}
		},
	})
}

// index sends a browser to the lead's page and tells an API client where
// the contract is.
func (s *Server) index(c echo.Context) error {
	if strings.Contains(c.Request().Header.Get(echo.HeaderAccept), "text/html") {
		return c.Redirect(http.StatusSeeOther, "/approvals")
	}
	return c.JSON(http.StatusOK, indexAnswer{Service: "countersign", OpenAPI: "/openapi.json", Approvals: "/approvals"})
}

// indexAnswer is GET / for an API client.
type indexAnswer struct {
	Service   string `json:"service"`
	OpenAPI   string `json:"openapi"`
	Approvals string `json:"approvals"`
}
