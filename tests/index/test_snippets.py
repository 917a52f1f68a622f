from __future__ import annotations

from crawlspace.index.snippets import make_snippet


def test_the_passage_with_most_query_terms_is_chosen_and_marked() -> None:
    text = " ".join(["filler"] * 50) + " the Quick brown\nfox jumps " + " ".join(["more"] * 50)
    snippet = make_snippet(text, ["quick", "fox"], words=8)
    assert snippet.text.startswith("…") and snippet.text.endswith("…")
    assert "[Quick] brown [fox] jumps" in snippet.marked()
    assert [snippet.text[a:b] for a, b in snippet.highlights] == ["Quick", "fox"]


def test_distinct_terms_count_before_repeats() -> None:
    text = "apple apple apple apple x x x x x x x x apple banana y"
    snippet = make_snippet(text, ["apple", "banana"], words=3)
    assert snippet.marked() == "…[apple] [banana] y"


def test_a_text_without_the_terms_gives_its_start() -> None:
    snippet = make_snippet("one two three four five", ["zzz"], words=3)
    assert snippet.text == "one two three…" and snippet.highlights == ()
    assert make_snippet("", ["a"]).text == ""
    assert make_snippet("short text", ["text"], words=30).marked() == "short [text]"


def test_weights_prefer_the_rare_term() -> None:
    text = "the the the the x x x x x x rare word y y y"
    assert "[rare]" in make_snippet(text, ["the", "rare"], words=4, weights={"the": 0.01, "rare": 5.0}).marked()
    assert "[rare]" not in make_snippet(text, ["the", "rare"], words=4).marked()
