package search

import "testing"

// benchQueries mix short, long, exact-name and common-word queries.
var benchQueries = []string{
	"create a github issue",
	"send message to slack channel",
	"read file contents",
	"slack_post_message",
	"list customer invoices with status and due date",
}

func BenchmarkSearch10k(b *testing.B) {
	ix := Build(catalogue(10000 - len(realTools)))
	for _, q := range benchQueries {
		b.Run(q, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if hits := ix.Search(q, 10); len(hits) == 0 {
					b.Fatal("no hits")
				}
			}
		})
	}
}

func BenchmarkBuild10k(b *testing.B) {
	docs := catalogue(10000 - len(realTools))
	b.ReportAllocs()
	for b.Loop() {
		if ix := Build(docs); ix.Len() != len(docs) {
			b.Fatal("wrong length")
		}
	}
}
