"""The state keeps each crawled page's links (what a 304 page stands for in the next crawl)."""

from __future__ import annotations

import sqlite3

from sync.edges.state import StateDB


def test_links_kept_read_dropped_and_cleared(tmp_path):
    with StateDB(tmp_path / "s.db") as st:
        st.put_links([("https://h/a", '{"links":["https://h/b"]}'), ("https://h/b", '{"links":[]}')])
        st.put_links([("https://h/a", '{"links":["https://h/c"]}')])  # replaced, not added
        assert st.get_links(["https://h/a", "https://h/x"]) == {"https://h/a": '{"links":["https://h/c"]}'}
        st.drop_links(["https://h/a"])
        assert st.get_links(["https://h/a", "https://h/b"]) == {"https://h/b": '{"links":[]}'}
        st.clear()
        assert st.get_links(["https://h/b"]) == {}


def test_unreadable_kept_links_read_as_none(tmp_path):
    with StateDB(tmp_path / "s.db") as st:
        st.put_links([("https://h/a", "{}")])
    db = sqlite3.connect(tmp_path / "s.db")
    db.execute("UPDATE page_links SET links = x'00ff'")
    db.commit()
    db.close()
    with StateDB(tmp_path / "s.db") as st:
        assert st.get_links(["https://h/a"]) == {}


def test_an_older_state_file_gains_the_links_table(tmp_path):
    path = tmp_path / "s.db"
    with StateDB(path):
        pass
    db = sqlite3.connect(path)
    db.execute("DROP TABLE page_links")
    db.commit()
    db.close()
    with StateDB(path) as st:
        st.put_links([("https://h/a", "{}")])
        assert st.get_links(["https://h/a"]) == {"https://h/a": "{}"}
