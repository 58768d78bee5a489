"""A topology as data: its definition, the references and job file it runs, where its key-value states live."""
