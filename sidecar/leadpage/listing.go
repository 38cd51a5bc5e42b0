package leadpage

import (
	"cmp"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/identity"
	"github.com/countersign/countersign/executor/store"
)

// Views of the page: what is waiting (the default), and what the person
// signed in decided.
const (
	viewWaiting = ""
	viewDecided = "decided"
)

// Sort orders of a listing. Waiting defaults to oldest first, decided to
// the latest decision first.
const (
	sortDefault  = ""
	sortOldest   = "oldest"
	sortNewest   = "newest"
	sortTimeLeft = "time_left"
)

// statusAny shows every status; the waiting view otherwise shows pending.
const statusAny = "any"

// listing is what the person asked to see, from the query: a view, its
// filters and its order. A value that is not one of those offered reads
// as the default, so a URL edited by hand shows something sensible.
type listing struct {
	View   string
	Status string // "", statusAny or an approval status
	Region string // the requester's region, any case
	Rep    string // the requester
	Sort   string
}

var statuses = []store.ApprovalStatus{store.ApprovalPending, store.ApprovalApproved, store.ApprovalUsed,
	store.ApprovalRejected, store.ApprovalExpired, store.ApprovalVoid}

func parseListing(q url.Values) listing {
	l := listing{View: q.Get("view"), Status: q.Get("status"), Region: q.Get("region"), Rep: q.Get("rep"), Sort: q.Get("sort")}
	if l.View != viewDecided {
		l.View = viewWaiting
	}
	if l.Status != statusAny && !slices.Contains(statuses, store.ApprovalStatus(l.Status)) {
		l.Status = ""
	}
	if len(l.Region) > 16 {
		l.Region = ""
	}
	if _, err := identity.Canonical(l.Rep); err != nil {
		l.Rep = ""
	}
	switch l.Sort {
	case sortOldest, sortNewest, sortTimeLeft:
	default:
		l.Sort = sortDefault
	}
	return l
}

// backQuery reads the query a decision form carries back (its "back"
// field), which parseListing then reads as it would a URL's.
func backQuery(raw string) url.Values {
	q, err := url.ParseQuery(raw)
	if err != nil {
		return url.Values{}
	}
	return q
}

// query is l as a query string, without its defaults.
func (l listing) query() string {
	q := url.Values{}
	for k, v := range map[string]string{"view": l.View, "status": l.Status, "region": l.Region, "rep": l.Rep, "sort": l.Sort} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q.Encode()
}

// url is path with l's query.
func (l listing) url(path string) string {
	if q := l.query(); q != "" {
		return path + "?" + q
	}
	return path
}

// engineQuery is what the engine is asked for: the view and the status.
// Region and rep are applied after (keeps), so that the filters can offer
// the regions and reps the view holds.
func (l listing) engineQuery(who string) engine.ApprovalQuery {
	q := engine.ApprovalQuery{All: true, Facts: true}
	switch {
	case l.Status == statusAny:
	case l.Status != "":
		q.Status = store.ApprovalStatus(l.Status)
	case l.View == viewWaiting:
		q.Status = store.ApprovalPending
	}
	if l.View == viewDecided {
		q.Approver = who
	}
	return q
}

// keeps reports whether the region and rep filters keep it.
func (l listing) keeps(it engine.ApprovalItem) bool {
	return (l.Region == "" || strings.EqualFold(it.RequesterRegion, l.Region)) &&
		(l.Rep == "" || identity.Same(it.Requester, l.Rep))
}

// order sorts items as l asks.
func (l listing) order(items []engine.ApprovalItem) {
	by := l.Sort
	if by == sortDefault {
		by = sortOldest
		if l.View == viewDecided {
			by = sortNewest
		}
	}
	slices.SortStableFunc(items, func(a, b engine.ApprovalItem) int {
		switch by {
		case sortTimeLeft:
			return a.Expires.Compare(b.Expires)
		case sortNewest:
			return cmp.Or(lastMoved(b).Compare(lastMoved(a)), b.Created.Compare(a.Created))
		}
		return a.Created.Compare(b.Created)
	})
}

// lastMoved is when an approval last changed status: decided, used,
// voided or expired, or else created.
func lastMoved(it engine.ApprovalItem) time.Time {
	if !it.Decided.IsZero() {
		return it.Decided
	}
	return it.Created
}
