package groupcommit

// Queued is how many functions wait for the next commit, so that a test can
// line writers up behind a commit in progress.
func (g *Group) Queued() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.queue)
}
