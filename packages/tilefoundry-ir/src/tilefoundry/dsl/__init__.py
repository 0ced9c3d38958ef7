"""tilefoundry.dsl: the authoring surface."""
