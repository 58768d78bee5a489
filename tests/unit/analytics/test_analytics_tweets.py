from txdag.analytics.tweets import tokens, tweet_partials


def test_tokens_split_on_spaces_only_like_java_string_tokenizer():
    assert tokens("  hi @bob\t#x  #y,  ") == ["hi", "@bob\t#x", "#y,"]
    assert tokens("") == [] and tokens("   ") == []


def test_each_user_and_hashtag_counts_once_per_tweet():
    counts = tweet_partials(["@a @a #x #x #y", "@a #x", "#x", "@b", "@ # ##x @a@b"])
    assert counts["users"] == {("@a",): 2, ("@b",): 1, ("@",): 1, ("@a@b",): 1}
    assert counts["hashtags"] == {("#x",): 3, ("#y",): 1, ("#",): 1, ("##x",): 1}
    assert counts["users_hashtags"] == {
        ("@a", "#x"): 2, ("@a", "#y"): 1, ("@", "#"): 1, ("@", "##x"): 1, ("@a@b", "#"): 1, ("@a@b", "##x"): 1,
    }


def test_case_and_punctuation_are_kept():
    counts = tweet_partials(["#Storm #storm #storm."])
    assert set(counts["hashtags"]) == {("#Storm",), ("#storm",), ("#storm.",)}
