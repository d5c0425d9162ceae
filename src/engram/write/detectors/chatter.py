"""Transient chatter: greetings, thanks, acknowledgements and laughter.

Such turns carry nothing worth recalling and would crowd real memories.
"""

from __future__ import annotations

import re

from engram.write.detectors.normalise import clean

__all__ = ["is_transient_chatter"]

_CHATTER_WORDS = frozenset(
    """ok okay okey k kk okie alright aight fine sure yes yeah yep yup ya yea no nope nah thanks
    thank thx ty tysm thankyou cheers ta you u much so very a lot lots all appreciated lol lmao rofl
    haha hahaha hehe heh ha xd omg wow oh ah aha uh um hmm hm mhm ooh oops hi hello hey heya hiya yo
    there everyone folks guys morning afternoon evening night good bye goodbye cya see later soon
    ttyl brb gtg g2g bbl afk back np nw welcome youre you're sounds great cool nice awesome perfect
    excellent lovely neat sweet gotcha got it understood noted will do done right true exactly
    indeed agreed same me too makes sense that this sorry my bad whatever nevermind nvm wait sec
    one moment hold on please plz pls""".split()
)
# Words in any script: a turn in Cyrillic or Chinese is not "only punctuation".
_WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)*|\d+")


def is_transient_chatter(text: str) -> bool:
    """True for content-free turns: greetings, thanks, acknowledgements, laughter.

    A turn is chatter when it is short and every word is a chatter word; text that
    is only punctuation or emoji is chatter too. Numbers are never chatter, and
    neither are words of other scripts (they are not in the English chatter list).
    """
    words = _WORD.findall(clean(text).lower())
    if len(words) > 8:
        return False
    return all(word in _CHATTER_WORDS for word in words)
