// Package search ranks MCP tool definitions against a free-text query, for the
// gateway's tool_search meta-tool: when a catalogue holds thousands of tools
// that are deferred (hidden from tools/list), a client describes what it wants
// and gets back the few tools that fit best.
//
// Ranking is Okapi BM25 over three weighted fields in the manner of BM25F:
// each field's term frequency is normalised by that field's length against
// its average (b = 0.75), the normalised frequencies are combined with the
// weights 3 (name), 1.5 (parameters) and 1 (description), and the
// combination is saturated once with k1 = 1.2 and multiplied by the term's
// IDF. Terms are words split from identifiers and text (snake_case,
// kebab-case, camelCase and dotted names included), lower-cased, stemmed
// lightly and stripped of stop words, plus pairs of adjacent words and whole
// identifiers, so that phrases and exact tool names rank first.
//
// An index of 10,000 tools takes a few megabytes: postings are one flat array
// of (document, weighted frequency) pairs, eight bytes each, sliced by term.
// A search allocates only its result.
package search

import (
	"cmp"
	"math"
	"slices"
	"sync"
)

// BM25F parameters.
const (
	k1 = 1.2
	b  = 0.75

	nameWeight   = 3.0
	paramsWeight = 1.5
	descWeight   = 1.0
)

// Fields of a document, in posting order.
const (
	fieldName = iota
	fieldParams
	fieldDesc
	numFields
)

var fieldWeights = [numFields]float64{nameWeight, paramsWeight, descWeight}

// Doc is one tool as the index sees it.
type Doc struct {
	// Key identifies the tool in search results (for example its exposed
	// name). It is not itself indexed.
	Key string
	// Name is the tool's name, the most heavily weighted field.
	Name string
	// Description is the tool's title and description.
	Description string
	// Params holds the names of the tool's parameters and their
	// descriptions.
	Params []string
}

// Hit is one search result.
type Hit struct {
	Key   string
	Score float64
}

// posting records that a term occurs in a document, with the term's
// length-normalised, field-weighted frequency there.
type posting struct {
	doc int32
	tf  float32
}

// Index is an immutable BM25F index of tool documents. Search may be called
// from many goroutines at once.
type Index struct {
	keys  []string
	terms map[string]int32 // term → term id
	idf   []float32        // by term id
	offs  []uint32         // postings of term t are posts[offs[t]:offs[t+1]]
	posts []posting
	pool  sync.Pool // of *scratch
}

// scratch holds the per-search buffers, reused through Index.pool.
type scratch struct {
	tok     tokenizer
	scores  []float32 // by doc; zero for documents no query term touched
	touched []int32
	qterms  []int32
	heap    []int32
}

// docTerm is the term frequency of one term in one document, by field.
type docTerm struct {
	term int32
	tf   [numFields]uint16
}

// Build indexes docs. Documents keep their order for tie breaking when two
// share a key; documents with no terms at all are counted but never found.
func Build(docs []Doc) *Index {
	ix := &Index{
		keys:  make([]string, len(docs)),
		terms: make(map[string]int32),
	}
	var (
		tok      tokenizer
		occ      []docTerm // occurrences of the current document, one per token
		all      []docTerm // aggregated term frequencies of every document
		docEnd   = make([]int, len(docs))
		lens     = make([][numFields]uint32, len(docs))
		totalLen [numFields]float64
	)
	addField := func(doc, field int, text string) {
		tok.reset()
		tok.tokenize(text)
		for i := range tok.n() {
			t := tok.token(i)
			id, ok := ix.terms[string(t)]
			if !ok {
				id = int32(len(ix.terms))
				ix.terms[string(t)] = id
			}
			var dt docTerm
			dt.term = id
			dt.tf[field] = 1
			occ = append(occ, dt)
		}
		lens[doc][field] += uint32(tok.n())
	}
	for d, doc := range docs {
		ix.keys[d] = doc.Key
		occ = occ[:0]
		addField(d, fieldName, doc.Name)
		addField(d, fieldDesc, doc.Description)
		for _, p := range doc.Params {
			addField(d, fieldParams, p)
		}
		slices.SortFunc(occ, func(x, y docTerm) int { return cmp.Compare(x.term, y.term) })
		for _, o := range occ {
			if n := len(all); n > 0 && (d == 0 || n > docEnd[d-1]) && all[n-1].term == o.term {
				for f := range numFields {
					if all[n-1].tf[f] < math.MaxUint16 {
						all[n-1].tf[f] += o.tf[f]
					}
				}
				continue
			}
			all = append(all, o)
		}
		docEnd[d] = len(all)
		for f := range numFields {
			totalLen[f] += float64(lens[d][f])
		}
	}

	var avgLen [numFields]float64
	for f := range numFields {
		if len(docs) > 0 {
			avgLen[f] = totalLen[f] / float64(len(docs))
		}
	}
	nTerms := len(ix.terms)
	ix.offs = make([]uint32, nTerms+1)
	for _, dt := range all {
		ix.offs[dt.term+1]++
	}
	ix.idf = make([]float32, nTerms)
	n := float64(len(docs))
	for t := range nTerms {
		df := float64(ix.offs[t+1])
		ix.idf[t] = float32(math.Log(1 + (n-df+0.5)/(df+0.5)))
		ix.offs[t+1] += ix.offs[t]
	}
	ix.posts = make([]posting, len(all))
	next := slices.Clone(ix.offs[:nTerms])
	start := 0
	for d := range docs {
		var norm [numFields]float64
		for f := range numFields {
			norm[f] = 1
			if avgLen[f] > 0 {
				norm[f] = (1 - b) + b*float64(lens[d][f])/avgLen[f]
			}
		}
		for _, dt := range all[start:docEnd[d]] {
			var tf float64
			for f := range numFields {
				tf += fieldWeights[f] * float64(dt.tf[f]) / norm[f]
			}
			ix.posts[next[dt.term]] = posting{doc: int32(d), tf: float32(tf)}
			next[dt.term]++
		}
		start = docEnd[d]
	}
	ix.pool.New = func() any { return &scratch{scores: make([]float32, len(ix.keys))} }
	return ix
}

// Len returns the number of documents in the index.
func (ix *Index) Len() int { return len(ix.keys) }

// Search returns up to limit documents that share at least one term with
// query, best first; equal scores are ordered by key (then by document
// order), so results are deterministic. It returns nil when limit is not
// positive or the query has no indexed terms. Each distinct query term counts
// once.
func (ix *Index) Search(query string, limit int) []Hit {
	if limit <= 0 || len(ix.keys) == 0 {
		return nil
	}
	s := ix.pool.Get().(*scratch)
	defer ix.pool.Put(s)

	s.tok.reset()
	s.tok.tokenize(query)
	s.qterms = s.qterms[:0]
	for i := range s.tok.n() {
		if id, ok := ix.terms[string(s.tok.token(i))]; ok && !slices.Contains(s.qterms, id) {
			s.qterms = append(s.qterms, id)
		}
	}
	if len(s.qterms) == 0 {
		return nil
	}

	touched := s.touched[:0]
	for _, t := range s.qterms {
		idf := ix.idf[t]
		for _, p := range ix.posts[ix.offs[t]:ix.offs[t+1]] {
			if s.scores[p.doc] == 0 {
				touched = append(touched, p.doc)
			}
			s.scores[p.doc] += idf * p.tf * (k1 + 1) / (p.tf + k1)
		}
	}

	// Keep the best limit documents in a min-heap whose root is the worst.
	h := s.heap[:0]
	for _, d := range touched {
		if len(h) < limit {
			h = append(h, d)
			ix.siftUp(s.scores, h, len(h)-1)
		} else if ix.worse(s.scores, h[0], d) {
			h[0] = d
			ix.siftDown(s.scores, h, 0)
		}
	}
	hits := make([]Hit, len(h))
	for i := len(h) - 1; i >= 0; i-- {
		d := h[0]
		hits[i] = Hit{Key: ix.keys[d], Score: float64(s.scores[d])}
		h[0] = h[i]
		h = h[:i]
		ix.siftDown(s.scores, h, 0)
	}

	for _, d := range touched {
		s.scores[d] = 0
	}
	s.touched = touched[:0]
	s.heap = h[:0]
	return hits
}

// worse reports whether document x ranks below document y.
func (ix *Index) worse(scores []float32, x, y int32) bool {
	if scores[x] != scores[y] {
		return scores[x] < scores[y]
	}
	if c := cmp.Compare(ix.keys[x], ix.keys[y]); c != 0 {
		return c > 0
	}
	return x > y
}

func (ix *Index) siftUp(scores []float32, h []int32, i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !ix.worse(scores, h[i], h[parent]) {
			return
		}
		h[i], h[parent] = h[parent], h[i]
		i = parent
	}
}

func (ix *Index) siftDown(scores []float32, h []int32, i int) {
	for {
		least := i
		if l := 2*i + 1; l < len(h) && ix.worse(scores, h[l], h[least]) {
			least = l
		}
		if r := 2*i + 2; r < len(h) && ix.worse(scores, h[r], h[least]) {
			least = r
		}
		if least == i {
			return
		}
		h[i], h[least] = h[least], h[i]
		i = least
	}
}
