package main

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"math"
)

// The charts are plain SVG written by hand, so that the lab needs nothing
// outside the standard library.

// palette colours the lines and bars of a chart, in order.
var palette = []string{"#d62728", "#ff7f0e", "#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#17becf"}

const (
	chartWidth  = 860
	chartHeight = 420
	marginLeft  = 64
	marginRight = 24
	marginTop   = 44
	marginBot   = 52 // the plot's bottom is chartHeight-marginBot; the legend goes below chartHeight
)

// dashes tell apart the lines of a chart besides their colour, in order,
// so that lines of close colours, or drawn over each other, stay distinct.
var dashes = []string{"", "7,3", "", "2,2", "", "10,3,2,3", ""}

// lineStyle returns the SVG stroke attributes of line i of n: its colour,
// its dash, and a width that shrinks with the drawing order, so that a line
// drawn over an equal one leaves it showing on both sides.
func lineStyle(i, n int) string {
	width := 1.5 + 0.5*float64(n-1-i)
	style := fmt.Sprintf(`stroke="%s" stroke-width="%.1f" stroke-linejoin="round"`, palette[i%len(palette)], width)
	if d := dashes[i%len(dashes)]; d != "" {
		style += fmt.Sprintf(` stroke-dasharray="%s"`, d)
	}
	return style
}

// line is one series of a lineChart: the value of point i is at x = i·dx.
// A note is written under its name in the legend; a mark, if positive, is
// drawn as a dashed vertical line of the series' colour at x = mark (the
// moment the series recovered, say).
type line struct {
	name string
	ys   []float64
	note string
	mark float64
}

// band shades the x range [from, to) of a lineChart, such as an outage.
type band struct {
	from, to float64
	label    string
}

// hline is a dashed horizontal reference line of a lineChart, such as the
// server's capacity.
type hline struct {
	y     float64
	label string
}

// lineChart is a chart of one or more series over a common x axis.
type lineChart struct {
	title, xLabel, yLabel string
	dx                    float64 // x distance between two points
	lines                 []line
	bands                 []band
	hlines                []hline
}

// svg renders the chart.
func (c lineChart) svg() []byte {
	var b bytes.Buffer
	c.lines = trimmed(c.lines)
	if !(c.dx > 0) {
		c.dx = 1
	}
	points := 0
	ymax := 0.0
	for _, l := range c.lines {
		points = max(points, len(l.ys))
		for _, y := range l.ys {
			ymax = max(ymax, y)
		}
	}
	for _, h := range c.hlines {
		ymax = max(ymax, h.y)
	}
	xmax := max(float64(points-1)*c.dx, c.dx)
	ystep := niceStep(ymax, 5)
	ytop := math.Max(ystep, math.Ceil(ymax/ystep)*ystep)
	plotW := float64(chartWidth - marginLeft - marginRight)
	plotH := float64(chartHeight - marginTop - marginBot)
	px := func(x float64) float64 { return marginLeft + x/xmax*plotW }
	py := func(y float64) float64 { return marginTop + plotH - y/ytop*plotH }

	header(&b, c.title, chartHeight+legendHeight(c.lines))
	for _, bd := range c.bands {
		fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%.1f" fill="#eeeeee"/>`+"\n",
			px(bd.from), marginTop, px(bd.to)-px(bd.from), plotH)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" font-size="11" fill="#666" text-anchor="middle">%s</text>`+"\n",
			(px(bd.from)+px(bd.to))/2, marginTop+14, esc(bd.label))
	}
	// Grid and y ticks.
	for y := 0.0; y <= ytop+ystep/2; y += ystep {
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#dddddd"/>`+"\n", marginLeft, py(y), px(xmax), py(y))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" font-size="11" text-anchor="end">%s</text>`+"\n", marginLeft-6, py(y)+4, num(y))
	}
	// X ticks.
	xstep := niceStep(xmax, 8)
	for x := 0.0; x <= xmax+xstep/1000; x += xstep {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333"/>`+"\n", px(x), py(0), px(x), py(0)+5)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="11" text-anchor="middle">%s</text>`+"\n", px(x), py(0)+18, num(x))
	}
	axes(&b, c.xLabel, c.yLabel)
	for _, h := range c.hlines {
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#000" stroke-dasharray="6,4"/>`+"\n",
			marginLeft, py(h.y), px(xmax), py(h.y))
	}
	for i, l := range c.lines {
		if l.mark > 0 && l.mark <= xmax {
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%.1f" stroke="%s" stroke-dasharray="3,3"/>`+"\n",
				px(l.mark), marginTop, px(l.mark), py(0), palette[i%len(palette)])
		}
		fmt.Fprintf(&b, `<polyline fill="none" %s points="`, lineStyle(i, len(c.lines)))
		for j, y := range l.ys {
			if j > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%.1f,%.1f", px(float64(j)*c.dx), py(y))
		}
		b.WriteString(`"/>` + "\n")
	}
	// The labels of the reference lines go over the series, on a white
	// halo, alternating between the right and the left end, so that two
	// close lines keep readable labels.
	for i, h := range c.hlines {
		x, anchor := px(xmax)-4, "end"
		if i%2 == 1 {
			x, anchor = marginLeft+4, "start"
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="11" text-anchor="%s" stroke="white" stroke-width="3" paint-order="stroke">%s</text>`+"\n",
			x, py(h.y)-4, anchor, esc(h.label))
	}
	legend(&b, c.lines)
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// trimmed returns lines cut after the last point where any of them is
// non-zero, plus one: the quiet end of a run is not worth the width.
func trimmed(lines []line) []line {
	last := 0
	for _, l := range lines {
		for i, y := range l.ys {
			if y != 0 {
				last = max(last, i)
			}
		}
	}
	out := make([]line, len(lines))
	for i, l := range lines {
		out[i] = l
		out[i].ys = l.ys[:min(len(l.ys), last+2)]
	}
	return out
}

// bar is one bar of a barChart.
type bar struct {
	label string
	value float64
}

// barChart is a horizontal bar chart with a logarithmic axis: its values
// span orders of magnitude (1 to 243, say). Values below 1 are drawn as 1.
type barChart struct {
	title, xLabel string
	bars          []bar
}

// svg renders the chart.
func (c barChart) svg() []byte {
	var b bytes.Buffer
	vmax := 10.0
	for _, br := range c.bars {
		vmax = max(vmax, br.value)
	}
	decades := math.Ceil(math.Log10(vmax))
	const labelW = 300
	plotW := float64(chartWidth - labelW - 40)
	rowH := 26.0
	height := marginTop + int(rowH*float64(len(c.bars))) + marginBot
	px := func(v float64) float64 { return labelW + math.Log10(max(v, 1))/decades*plotW }

	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif">`+"\n",
		chartWidth, height, chartWidth, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="15" font-weight="bold">%s</text>`+"\n", 12, esc(c.title))
	bottom := float64(height - marginBot)
	for d := 0.0; d <= decades; d++ {
		x := px(math.Pow(10, d))
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%.1f" stroke="#dddddd"/>`+"\n", x, marginTop, x, bottom)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="11" text-anchor="middle">%s</text>`+"\n", x, bottom+16, num(math.Pow(10, d)))
	}
	for i, br := range c.bars {
		y := float64(marginTop) + float64(i)*rowH
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" font-size="12" text-anchor="end">%s</text>`+"\n", labelW-8, y+rowH/2+4, esc(br.label))
		fmt.Fprintf(&b, `<rect x="%d" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`+"\n",
			labelW, y+4, max(px(br.value)-labelW, 1), rowH-8, palette[i%len(palette)])
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="11">%s</text>`+"\n", px(br.value)+4, y+rowH/2+4, num(br.value))
	}
	fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333"/>`+"\n", labelW, bottom, px(math.Pow(10, decades)), bottom)
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" font-size="12" text-anchor="middle">%s</text>`+"\n", labelW+plotW/2, height-12, esc(c.xLabel))
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// header opens an SVG document of the line chart's width and the given
// height, with a title.
func header(b *bytes.Buffer, title string, height int) {
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif">`+"\n",
		chartWidth, height, chartWidth, height)
	fmt.Fprintf(b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(b, `<text x="%d" y="24" font-size="15" font-weight="bold">%s</text>`+"\n", marginLeft, esc(title))
}

// axes draws the x and y axes of a line chart and their labels.
func axes(b *bytes.Buffer, xLabel, yLabel string) {
	right := chartWidth - marginRight
	bottom := chartHeight - marginBot
	fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#333"/>`+"\n", marginLeft, bottom, right, bottom)
	fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#333"/>`+"\n", marginLeft, marginTop, marginLeft, bottom)
	fmt.Fprintf(b, `<text x="%d" y="%d" font-size="12" text-anchor="middle">%s</text>`+"\n", (marginLeft+right)/2, chartHeight-12, esc(xLabel))
	fmt.Fprintf(b, `<text x="16" y="%d" font-size="12" text-anchor="middle" transform="rotate(-90 16 %d)">%s</text>`+"\n",
		(marginTop+bottom)/2, (marginTop+bottom)/2, esc(yLabel))
}

// legendColumns is the number of columns of a line chart's legend.
const legendColumns = 2

// legendRow returns the height of one row of a legend of lines: taller when
// a line has a note under its name.
func legendRow(lines []line) int {
	for _, l := range lines {
		if l.note != "" {
			return 34
		}
	}
	return 20
}

// legendHeight returns the height the legend of lines takes below the plot.
func legendHeight(lines []line) int {
	rows := (len(lines) + legendColumns - 1) / legendColumns
	return rows*legendRow(lines) + 16
}

// legend lists the lines' names, styles and notes below the plot, in
// columns, where long names have the chart's whole width.
func legend(b *bytes.Buffer, lines []line) {
	colW := (chartWidth - marginLeft) / legendColumns
	step := legendRow(lines)
	for i, l := range lines {
		x := marginLeft + (i%legendColumns)*colW
		y := chartHeight + 12 + (i/legendColumns)*step
		fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" %s/>`+"\n", x, y, x+30, y, lineStyle(i, len(lines)))
		fmt.Fprintf(b, `<text x="%d" y="%d" font-size="12">%s</text>`+"\n", x+36, y+4, esc(l.name))
		if l.note != "" {
			fmt.Fprintf(b, `<text x="%d" y="%d" font-size="10" fill="#555">%s</text>`+"\n", x+36, y+17, esc(l.note))
		}
	}
}

// niceStep returns a step of 1, 2 or 5 times a power of ten that cuts
// [0, span] into about n intervals.
func niceStep(span float64, n int) float64 {
	if span <= 0 || math.IsNaN(span) || math.IsInf(span, 0) {
		return 1
	}
	raw := span / float64(n)
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if raw <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// num formats an axis value without trailing zeros.
func num(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

// esc escapes text for SVG.
func esc(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s)) // writes to a bytes.Buffer never fail
	return b.String()
}
