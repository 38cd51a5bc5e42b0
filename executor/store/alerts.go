package store

import "fmt"

// bAlerts holds what the monitors have alerted, keyed by what the alert is
// about (a violating step, a standing condition): kept in the store, so
// that an alert is raised once however many sidecars watch the store and
// however often they restart.
var bAlerts = []byte("alerts")

// Alerted reports whether key was alerted.
func (t *Tx) Alerted(key string) bool { return t.bucket(bAlerts).Get([]byte(key)) != nil }

// MarkAlerted records that key was alerted.
func (t *Tx) MarkAlerted(key string) error {
	if err := t.bucket(bAlerts).Put([]byte(key), []byte{1}); err != nil {
		return fmt.Errorf("mark alert %s: %w", key, err)
	}
	return nil
}

// ClearAlerted forgets that key was alerted: its condition ended, and may
// be alerted again when it returns.
func (t *Tx) ClearAlerted(key string) error {
	if err := t.bucket(bAlerts).Delete([]byte(key)); err != nil {
		return fmt.Errorf("clear alert %s: %w", key, err)
	}
	return nil
}
