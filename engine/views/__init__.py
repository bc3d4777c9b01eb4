"""The vocabulary a protocol's hooks speak, below the protocols: the blocks of a run's detail,
the charts and sections of Insights (`blocks`), and the frame arithmetic those hooks share
(`aggregate` rates and intervals, `ballots`, per-run `rounds` frames). Protocols fill them,
`engine.reports` draws them: reports -> protocols -> views is the only direction, and nothing
here knows a protocol or the registry.
"""
