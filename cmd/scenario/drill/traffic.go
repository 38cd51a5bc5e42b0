package drill

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/countersign/countersign/executor/money"
)

// The traffic of the scenario.
const (
	duration    = 3 * time.Hour
	meanArrival = 90 * time.Second
	reshipShare = 1.0 / 3
)

// Refund classes and their shares.
const (
	classSmall = "under $50"
	classMid   = "$51-$500"
	classHigh  = "above $500"
)

// Stream ids of the drill's random sources: one per consumer, so that a
// change in how one consumes its stream leaves the others as they were.
const (
	streamTraffic = 0x7472616666696321 // tickets
	streamLeads   = 0x6c65616473212121 // the leads' choices
)

// ticket is one support ticket and the workflow the agent opens for it.
type ticket struct {
	ID       string // T-0001
	Workflow string // W-0001
	At       time.Duration
	Rep      string
	Region   string
	Order    string
	Customer string
	Paid     money.Cents
	Amount   money.Cents
	Class    string
	Reship   bool
}

// tickets draws the whole traffic of a seed up front, so that what the
// system does cannot change what arrives.
func tickets(seed uint64) []ticket {
	rng := rand.New(rand.NewPCG(seed, streamTraffic))
	var out []ticket
	at := time.Duration(0)
	for i := 1; ; i++ {
		gap := time.Duration(rng.ExpFloat64() * float64(meanArrival))
		at += gap.Round(time.Millisecond)
		if at >= duration {
			return out
		}
		t := ticket{
			ID: fmt.Sprintf("T-%04d", i), Workflow: fmt.Sprintf("W-%04d", i), At: at,
			Order: fmt.Sprintf("O-%d", 2000+i), Customer: fmt.Sprintf("customer-%d", 100+i),
		}
		t.Rep, t.Region = "rep-ana", "EU"
		if rng.IntN(2) == 1 {
			t.Rep, t.Region = "rep-ben", "US"
		}
		var dollars int64
		switch u := rng.Float64(); {
		case u < 0.70:
			t.Class, dollars = classSmall, 5+rng.Int64N(45) // $5-$49
		case u < 0.92:
			t.Class, dollars = classMid, logUniform(rng, 51, 500)
		default:
			t.Class, dollars = classHigh, 501+rng.Int64N(400) // $501-$900
		}
		t.Amount = money.Cents(dollars * 100)
		t.Paid = t.Amount + money.Cents(rng.Int64N(151)*100)
		t.Reship = rng.Float64() < reshipShare
		out = append(out, t)
	}
}

// logUniform draws whole dollars in [lo, hi] with the logarithm uniform:
// each doubling of the amount is as likely as the next, so there are as
// many refunds from $60 to $120 as from $240 to $480.
func logUniform(rng *rand.Rand, lo, hi int64) int64 {
	l, h := math.Log(float64(lo)), math.Log(float64(hi))
	return min(hi, max(lo, int64(math.Round(math.Exp(l+rng.Float64()*(h-l))))))
}
