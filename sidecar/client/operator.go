package client

import (
	"context"
	"net/http"
)

// Switches answers each tool's switch: true when it may run.
func (c *Client) Switches(ctx context.Context) (map[string]bool, error) {
	var out SwitchList
	err := c.call(ctx, http.MethodGet, "/v1/switches", nil, nil, &out)
	return out.Switches, err
}

// SetSwitch turns a tool on or off, with the reason the audit records. A
// tool switched off holds every workflow at its next call of it.
func (c *Client) SetSwitch(ctx context.Context, tool string, enabled bool, reason string) (Switch, error) {
	body := struct {
		Enabled bool   `json:"enabled"`
		Reason  string `json:"reason,omitempty"`
	}{enabled, reason}
	var s Switch
	err := c.call(ctx, http.MethodPut, "/v1/switches/"+seg(tool), nil, body, &s)
	return s, err
}

// Modes answers each tool's stage of autonomy and its breakers.
func (c *Client) Modes(ctx context.Context) ([]Mode, error) {
	var out ModeList
	err := c.call(ctx, http.MethodGet, "/v1/modes", nil, nil, &out)
	return out.Modes, err
}

// SetMode sets a tool's mode (shadow, approval_only or auto), with the
// reason the audit records.
func (c *Client) SetMode(ctx context.Context, tool, mode, reason string) (Mode, error) {
	body := struct {
		Mode   string `json:"mode"`
		Reason string `json:"reason,omitempty"`
	}{mode, reason}
	var m Mode
	err := c.call(ctx, http.MethodPut, "/v1/modes/"+seg(tool), nil, body, &m)
	return m, err
}

// RaiseEpoch raises the credential epoch: the signing key rotates and every
// actor token minted before stops verifying downstream. It answers the new
// epoch.
func (c *Client) RaiseEpoch(ctx context.Context) (int, error) {
	var out Epoch
	err := c.call(ctx, http.MethodPost, "/v1/credentials/epoch", nil, nil, &out)
	return out.Epoch, err
}
