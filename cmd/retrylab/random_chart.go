package main

import (
	"bytes"
	"fmt"
	"math"
)

// randomColours colour the other policies of the random scenario's chart,
// in the order of randomPolicies after the defaults.
var randomColours = []string{"#ff7f0e", "#7f7f7f", "#2ca02c"}

// randomChart draws where the other policies stand against the defaults in
// each storm: a point per storm and policy, at its amplification over the
// defaults' (x) and its success minus the defaults' in points (y), labelled
// with the storm's number. Points up and to the left of the dashed lines
// (1.25x, +1 point) beat the defaults on success; the verdict's +0.3 bound
// widens the band for defaults near 1x.
func randomChart(r randomResult) []byte {
	type point struct {
		x, y   float64
		policy int
		storm  int
	}
	var pts []point
	xmin, xmax, ymin, ymax := 0.9, 1.5, -5.0, 5.0
	for _, sr := range r.storms {
		if len(sr.Runs) == 0 {
			continue
		}
		d := sr.Runs[0]
		for i, o := range sr.Runs[1:] {
			p := point{
				x:      o.amplification() / max(d.amplification(), 1e-9),
				y:      100 * (o.success() - d.success()),
				policy: i, storm: sr.Storm.Index,
			}
			p.x = min(p.x, 4) // a point beyond is drawn at the edge
			pts = append(pts, p)
			xmin, xmax = math.Min(xmin, p.x), math.Max(xmax, p.x)
			ymin, ymax = math.Min(ymin, p.y), math.Max(ymax, p.y)
		}
	}
	xmin, xmax = math.Floor(xmin*10)/10, math.Ceil(xmax*10)/10
	ystep := niceStep(ymax-ymin, 6)
	ymin, ymax = math.Floor(ymin/ystep)*ystep, math.Ceil(ymax/ystep)*ystep
	plotW := float64(chartWidth - marginLeft - marginRight)
	plotH := float64(chartHeight - marginTop - marginBot)
	px := func(x float64) float64 { return marginLeft + (x-xmin)/(xmax-xmin)*plotW }
	py := func(y float64) float64 { return marginTop + plotH - (y-ymin)/(ymax-ymin)*plotH }

	var b bytes.Buffer
	policies := randomPolicies()[1:]
	legendH := 20*len(policies) + 16
	header(&b, fmt.Sprintf("Storms drawn at random, seed %d: the other policies against the defaults", r.seed), chartHeight+legendH)
	for y := ymin; y <= ymax+ystep/2; y += ystep {
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#dddddd"/>`+"\n", marginLeft, py(y), px(xmax), py(y))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" font-size="11" text-anchor="end">%s</text>`+"\n", marginLeft-6, py(y)+4, num(y))
	}
	xstep := niceStep(xmax-xmin, 8)
	for x := math.Ceil(xmin/xstep) * xstep; x <= xmax+xstep/1000; x += xstep {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333"/>`+"\n", px(x), py(ymin), px(x), py(ymin)+5)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="11" text-anchor="middle">%s</text>`+"\n", px(x), py(ymin)+18, num(x))
	}
	axes(&b, "amplification over the defaults' (×)", "success minus the defaults' (points)")
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%.1f" stroke="#000" stroke-dasharray="6,4"/>`+"\n",
		px(verdictAmpRatio), marginTop, px(verdictAmpRatio), py(ymin))
	fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#000" stroke-dasharray="6,4"/>`+"\n",
		marginLeft, py(100*verdictPoint), px(xmax), py(100*verdictPoint))
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" font-size="11">%.2fx</text>`+"\n", px(verdictAmpRatio)+4, marginTop+12, verdictAmpRatio)
	for _, p := range pts {
		c := randomColours[p.policy%len(randomColours)]
		fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="4" fill="%s" fill-opacity="0.7"/>`+"\n", px(p.x), py(p.y), c)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="9" fill="%s">%d</text>`+"\n", px(p.x)+5, py(p.y)-3, c, p.storm)
	}
	for i, p := range policies {
		y := chartHeight + 12 + 20*i
		fmt.Fprintf(&b, `<circle cx="%d" cy="%d" r="4" fill="%s"/>`+"\n", marginLeft+8, y, randomColours[i%len(randomColours)])
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="12">%s</text>`+"\n", marginLeft+20, y+4, esc(p.name))
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}
