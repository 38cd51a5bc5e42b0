package store

// Switch reports whether tool is enabled. A tool never switched is enabled.
func (t *Tx) Switch(tool string) bool {
	return string(t.bucket(bSwitches).Get([]byte(tool))) != "off"
}

// SetSwitch turns tool on or off.
func (t *Tx) SetSwitch(tool string, enabled bool) error {
	v := "on"
	if !enabled {
		v = "off"
	}
	return t.bucket(bSwitches).Put([]byte(tool), []byte(v))
}
