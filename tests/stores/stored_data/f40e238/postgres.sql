--
-- PostgreSQL database dump
--

\restrict bdJ282Wt2u8JJBck8uM8eCPpWbvR4DBCX698Njr0czTQyhbj5VtjWdCVP3100FX

-- Dumped from database version 15.20 (Debian 15.20-0+deb12u1)
-- Dumped by pg_dump version 15.20 (Debian 15.20-0+deb12u1)

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

--
-- Name: resumable_stored; Type: SCHEMA; Schema: -; Owner: -
--

CREATE SCHEMA resumable_stored;


--
-- Name: resumable_commit_step(text, bigint, text, text, text, bytea, integer, bigint, bigint, bytea, bigint); Type: FUNCTION; Schema: resumable_stored; Owner: -
--

CREATE FUNCTION resumable_stored.resumable_commit_step(p_run_id text, p_seq bigint, p_name text, p_fingerprint text, p_status text, p_output bytea, p_attempts integer, p_started_at_ms bigint, p_finished_at_ms bigint, p_usage bytea, p_fence bigint) RETURNS boolean
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM 1 FROM "resumable_stored".resumable_runs
      WHERE run_id = p_run_id AND fence = p_fence FOR SHARE;
    IF NOT FOUND THEN
        RETURN FALSE;
    END IF;
    INSERT INTO "resumable_stored".resumable_steps (run_id, seq, name, fingerprint, status, output,
        attempts, started_at_ms, finished_at_ms, usage)
    VALUES (p_run_id, p_seq, p_name, p_fingerprint, p_status, p_output, p_attempts,
        p_started_at_ms, p_finished_at_ms, p_usage)
    ON CONFLICT (run_id, seq) DO UPDATE
       SET name = EXCLUDED.name, fingerprint = EXCLUDED.fingerprint,
           status = EXCLUDED.status, output = EXCLUDED.output,
           attempts = EXCLUDED.attempts, started_at_ms = EXCLUDED.started_at_ms,
           finished_at_ms = EXCLUDED.finished_at_ms, usage = EXCLUDED.usage;
    RETURN TRUE;
END
$$;


SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: resumable_chunks; Type: TABLE; Schema: resumable_stored; Owner: -
--

CREATE TABLE resumable_stored.resumable_chunks (
    hash text NOT NULL COLLATE pg_catalog."C",
    data bytea NOT NULL
);


--
-- Name: resumable_inputs; Type: TABLE; Schema: resumable_stored; Owner: -
--

CREATE TABLE resumable_stored.resumable_inputs (
    run_id text NOT NULL COLLATE pg_catalog."C",
    key text NOT NULL COLLATE pg_catalog."C",
    value bytea NOT NULL,
    sent_at_ms bigint NOT NULL
);


--
-- Name: resumable_meta; Type: TABLE; Schema: resumable_stored; Owner: -
--

CREATE TABLE resumable_stored.resumable_meta (
    key text NOT NULL,
    value text NOT NULL
);


--
-- Name: resumable_queue_starts; Type: TABLE; Schema: resumable_stored; Owner: -
--

CREATE TABLE resumable_stored.resumable_queue_starts (
    queue text NOT NULL,
    started_at_ms bigint NOT NULL
);


--
-- Name: resumable_runs; Type: TABLE; Schema: resumable_stored; Owner: -
--

CREATE TABLE resumable_stored.resumable_runs (
    run_id text NOT NULL COLLATE pg_catalog."C",
    workflow text NOT NULL,
    status text NOT NULL,
    input bytea NOT NULL,
    output bytea,
    created_at_ms bigint NOT NULL,
    updated_at_ms bigint NOT NULL,
    parent_id text COLLATE pg_catalog."C",
    forked_from text COLLATE pg_catalog."C",
    fork_seq bigint,
    queue text,
    lease_owner text,
    lease_expires_at_ms bigint DEFAULT 0 NOT NULL,
    fence bigint DEFAULT 0 NOT NULL,
    wake_at_ms bigint,
    expires_at_ms bigint,
    version text
);


--
-- Name: resumable_snapshot_chunks; Type: TABLE; Schema: resumable_stored; Owner: -
--

CREATE TABLE resumable_stored.resumable_snapshot_chunks (
    thread_id text NOT NULL COLLATE pg_catalog."C",
    namespace text NOT NULL COLLATE pg_catalog."C",
    checkpoint_id text NOT NULL COLLATE pg_catalog."C",
    hash text NOT NULL COLLATE pg_catalog."C"
);


--
-- Name: resumable_snapshots; Type: TABLE; Schema: resumable_stored; Owner: -
--

CREATE TABLE resumable_stored.resumable_snapshots (
    thread_id text NOT NULL COLLATE pg_catalog."C",
    namespace text NOT NULL COLLATE pg_catalog."C",
    checkpoint_id text NOT NULL COLLATE pg_catalog."C",
    parent_id text COLLATE pg_catalog."C",
    manifest bytea NOT NULL,
    label text,
    metadata bytea,
    created_at_ms bigint NOT NULL
);


--
-- Name: resumable_steps; Type: TABLE; Schema: resumable_stored; Owner: -
--

CREATE TABLE resumable_stored.resumable_steps (
    run_id text NOT NULL COLLATE pg_catalog."C",
    seq bigint NOT NULL,
    name text NOT NULL,
    fingerprint text NOT NULL,
    status text NOT NULL,
    output bytea,
    attempts integer NOT NULL,
    started_at_ms bigint NOT NULL,
    finished_at_ms bigint NOT NULL,
    usage bytea
);


--
-- Data for Name: resumable_chunks; Type: TABLE DATA; Schema: resumable_stored; Owner: -
--



--
-- Data for Name: resumable_inputs; Type: TABLE DATA; Schema: resumable_stored; Owner: -
--



--
-- Data for Name: resumable_meta; Type: TABLE DATA; Schema: resumable_stored; Owner: -
--

INSERT INTO resumable_stored.resumable_meta VALUES ('schema_version', '2');


--
-- Data for Name: resumable_queue_starts; Type: TABLE DATA; Schema: resumable_stored; Owner: -
--



--
-- Data for Name: resumable_runs; Type: TABLE DATA; Schema: resumable_stored; Owner: -
--

INSERT INTO resumable_stored.resumable_runs VALUES ('finished-1', 'stored.finished', 'succeeded', '\x0100d82937847b227e223a227475706c65222c2276223a5b7b227e223a227475706c65222c2276223a5b5b22616c706861222c2262657461222c2267616d6d61225d5d7d2c7b7d5d7d', '\x01006c3944547b226974656d73223a5b7b22646f63223a22616c706861222c226174223a7b227e223a226461746574696d65222c2276223a22323032362d31312d32365430393a30303a30302b30303a3030227d2c2273636f7265223a7b227e223a22646563696d616c222c2276223a22312e35227d2c22726177223a7b227e223a226279746573222c2276223a22595778776147453d227d7d2c7b22646f63223a2262657461222c226174223a7b227e223a226461746574696d65222c2276223a22323032362d31312d32365430393a30303a30302b30303a3030227d2c2273636f7265223a7b227e223a22646563696d616c222c2276223a22312e35227d2c22726177223a7b227e223a226279746573222c2276223a22596d563059513d3d227d7d2c7b22646f63223a2267616d6d61222c226174223a7b227e223a226461746574696d65222c2276223a22323032362d31312d32365430393a30303a30302b30303a3030227d2c2273636f7265223a7b227e223a22646563696d616c222c2276223a22312e35227d2c22726177223a7b227e223a226279746573222c2276223a225a3246746257453d227d7d5d2c2273686f75746564223a5b22414c504841222c2242455441222c2247414d4d41225d7d', 1795685543497, 1795685543720, NULL, NULL, NULL, NULL, NULL, 0, 1, NULL, NULL, NULL);
INSERT INTO resumable_stored.resumable_runs VALUES ('waiting-1', 'stored.waiting', 'waiting', '\x0100ddb83b067b227e223a227475706c65222c2276223a5b7b227e223a227475706c65222c2276223a5b2264656c7461225d7d2c7b7d5d7d', NULL, 1795685543728, 1795685543753, NULL, NULL, NULL, NULL, NULL, 0, 1, NULL, NULL, NULL);
INSERT INTO resumable_stored.resumable_runs VALUES ('failed-1', 'stored.failing', 'failed', '\x01008ba9f6357b227e223a227475706c65222c2276223a5b7b227e223a227475706c65222c2276223a5b226f6d656761225d7d2c7b7d5d7d', '\x01014e08c2ba28b52ffd60ae057d130066636524306d9c03a3a6ec4b0937c904abb1f9a4e86ba466ca5499c9d55a3fc61d63203d3030281558005a005c00522babc93fc790091b86d1ac2fdfd3960ddfbed91ca5241d16b3204d1d6fbabdd8c22cee497ab72e36c0ac88f362eb507c53e48b59d39b175bfab81413d26f768450db62d61fca7c69b1b57177e1d4d387c5ac4f13bd280267a74b50c51729da0a3dd037362bdcfc56201b2bc761f063b582040424e3c76a4002a346fbc4d94e2b4d85ec47f1373313360fa4f649e89219202c79e85eb2d54c4c0d9edeac1cba07fca3fc3954a2f8abb465053a95a0179529c9f4e6c7715a84920774cf69540097ea2f42c259ff922563916e49155f04d9583def697b9a6a8ffc590a16482df380ae8aefc5288a79a6b465b7af83f2109dac55c2e87a7a8b3c2f111d9a8770800d6c92810d6335152d42144d946415a7b699f5e7d089edef628b61702eb9ef4833178b1c00c8e9cdc9168bc02221b5c9407f4e19a67743831bb0d9b8fb94e246c9881174c920f7406a1b916ec9f4e6c6a5d89a8a090b81e324d09fd3e88136b6ef33a1efd001c180e30454a8b199636466829151585a542c066002119949ed1280d0b0408d6110b4486090313313331347190adccb24c13bc5fd8816a0590f12aa983985f40e2ca4b39531d2e25ac61ce2d992de41019b1f44125d210e6f900760f4e0e241351acd3bd534825c3cfc0d13681b83a4037ec4c973480fc0dbbc74f1486d4e51f30a501415b46011cebe8911d50c74b731af6e700403cec8adccca82e1b7626c2377a5951686030b5015aa615d2d975e7f62995ff2287ecb13f0dc089436c5a7df283a1d53954ce048f3d75c6c0226eed80c0be95f2a72d4f9975203', 1795685543764, 1795685543874, NULL, NULL, NULL, NULL, NULL, 0, 1, NULL, NULL, NULL);


--
-- Data for Name: resumable_snapshot_chunks; Type: TABLE DATA; Schema: resumable_stored; Owner: -
--



--
-- Data for Name: resumable_snapshots; Type: TABLE DATA; Schema: resumable_stored; Owner: -
--

INSERT INTO resumable_stored.resumable_snapshots VALUES ('thread-1', '', '006612a9ef8b96cb40b5a', NULL, '\x0100815618c87b2266756c6c223a7b2264223a7b227475726e223a7b226a223a2230227d7d7d2c226465707468223a307d', 'turn-0', NULL, 1795685543884);
INSERT INTO resumable_stored.resumable_snapshots VALUES ('thread-1', '', '006612a9ef8eb59495adb', '006612a9ef8b96cb40b5a', '\x0100805ef79e7b226465707468223a312c226f7073223a5b5b22736574222c5b227475726e225d2c7b226a223a2231227d5d5d7d', 'turn-1', NULL, 1795685543897);
INSERT INTO resumable_stored.resumable_snapshots VALUES ('thread-1', '', '006612a9ef909d1597c18', '006612a9ef8eb59495adb', '\x01005cabba507b226465707468223a322c226f7073223a5b5b22736574222c5b227475726e225d2c7b226a223a2232227d5d5d7d', 'turn-2', NULL, 1795685543905);


--
-- Data for Name: resumable_steps; Type: TABLE DATA; Schema: resumable_stored; Owner: -
--

INSERT INTO resumable_stored.resumable_steps VALUES ('finished-1', 1, 'fetch', 'f8405c81c33c5606', 'ok', '\x0100f03a1d177b22646f63223a22616c706861222c226174223a7b227e223a226461746574696d65222c2276223a22323032362d31312d32365430393a30303a30302b30303a3030227d2c2273636f7265223a7b227e223a22646563696d616c222c2276223a22312e35227d2c22726177223a7b227e223a226279746573222c2276223a22595778776147453d227d7d', 1, 1795685543670, 1795685543670, '\x0100c819d3405b7b2266656e6365223a312c226d6f64656c223a226770742d346f2d6d696e69222c2270726f7669646572223a6e756c6c2c22696e7075745f746f6b656e73223a3130302c226361636865645f696e7075745f746f6b656e73223a302c2263616368655f77726974655f746f6b656e73223a302c226f75747075745f746f6b656e73223a32302c22636f73745f757364223a6e756c6c7d5d');
INSERT INTO resumable_stored.resumable_steps VALUES ('finished-1', 2, 'fetch', '3c97846dcef66ca2', 'ok', '\x01001240294c7b22646f63223a2262657461222c226174223a7b227e223a226461746574696d65222c2276223a22323032362d31312d32365430393a30303a30302b30303a3030227d2c2273636f7265223a7b227e223a22646563696d616c222c2276223a22312e35227d2c22726177223a7b227e223a226279746573222c2276223a22596d563059513d3d227d7d', 1, 1795685543676, 1795685543676, '\x0100c819d3405b7b2266656e6365223a312c226d6f64656c223a226770742d346f2d6d696e69222c2270726f7669646572223a6e756c6c2c22696e7075745f746f6b656e73223a3130302c226361636865645f696e7075745f746f6b656e73223a302c2263616368655f77726974655f746f6b656e73223a302c226f75747075745f746f6b656e73223a32302c22636f73745f757364223a6e756c6c7d5d');
INSERT INTO resumable_stored.resumable_steps VALUES ('finished-1', 3, 'fetch', '2912a7f0840fcea7', 'ok', '\x0100cb5208f37b22646f63223a2267616d6d61222c226174223a7b227e223a226461746574696d65222c2276223a22323032362d31312d32365430393a30303a30302b30303a3030227d2c2273636f7265223a7b227e223a22646563696d616c222c2276223a22312e35227d2c22726177223a7b227e223a226279746573222c2276223a225a3246746257453d227d7d', 1, 1795685543688, 1795685543688, '\x0100c819d3405b7b2266656e6365223a312c226d6f64656c223a226770742d346f2d6d696e69222c2270726f7669646572223a6e756c6c2c22696e7075745f746f6b656e73223a3130302c226361636865645f696e7075745f746f6b656e73223a302c2263616368655f77726974655f746f6b656e73223a302c226f75747075745f746f6b656e73223a32302c22636f73745f757364223a6e756c6c7d5d');
INSERT INTO resumable_stored.resumable_steps VALUES ('finished-1', 5541078015050221597, 'shout', 'f8405c81c33c5606', 'ok', '\x01008342009501414c504841', 1, 1795685543692, 1795685543692, NULL);
INSERT INTO resumable_stored.resumable_steps VALUES ('finished-1', 6635490448321760141, 'shout', '2912a7f0840fcea7', 'ok', '\x010097e1e98e0147414d4d41', 1, 1795685543693, 1795685543693, NULL);
INSERT INTO resumable_stored.resumable_steps VALUES ('finished-1', 6773540357182199751, 'shout', '3c97846dcef66ca2', 'ok', '\x01009e3bcbb10142455441', 1, 1795685543693, 1795685543693, NULL);
INSERT INTO resumable_stored.resumable_steps VALUES ('waiting-1', 1, 'fetch', '27faa9b712c3d7e1', 'ok', '\x01004e0960e67b22646f63223a2264656c7461222c226174223a7b227e223a226461746574696d65222c2276223a22323032362d31312d32365430393a30303a30302b30303a3030227d2c2273636f7265223a7b227e223a22646563696d616c222c2276223a22312e35227d2c22726177223a7b227e223a226279746573222c2276223a225a4756736447453d227d7d', 1, 1795685543742, 1795685543742, '\x0100c819d3405b7b2266656e6365223a312c226d6f64656c223a226770742d346f2d6d696e69222c2270726f7669646572223a6e756c6c2c22696e7075745f746f6b656e73223a3130302c226361636865645f696e7075745f746f6b656e73223a302c2263616368655f77726974655f746f6b656e73223a302c226f75747075745f746f6b656e73223a32302c22636f73745f757364223a6e756c6c7d5d');
INSERT INTO resumable_stored.resumable_steps VALUES ('waiting-1', 2, 'wait_for:approval', '-', 'waiting', '\x01007e1151556e756c6c', 1, 1795685543748, 1795685543748, NULL);
INSERT INTO resumable_stored.resumable_steps VALUES ('failed-1', 1, 'fetch', '7a16d74cdd911241', 'ok', '\x010036bbedeb7b22646f63223a226f6d656761222c226174223a7b227e223a226461746574696d65222c2276223a22323032362d31312d32365430393a30303a30302b30303a3030227d2c2273636f7265223a7b227e223a22646563696d616c222c2276223a22312e35227d2c22726177223a7b227e223a226279746573222c2276223a226232316c5a32453d227d7d', 1, 1795685543858, 1795685543858, '\x0100c819d3405b7b2266656e6365223a312c226d6f64656c223a226770742d346f2d6d696e69222c2270726f7669646572223a6e756c6c2c22696e7075745f746f6b656e73223a3130302c226361636865645f696e7075745f746f6b656e73223a302c2263616368655f77726974655f746f6b656e73223a302c226f75747075745f746f6b656e73223a32302c22636f73745f757364223a6e756c6c7d5d');
INSERT INTO resumable_stored.resumable_steps VALUES ('failed-1', 2, 'explode', '7a16d74cdd911241', 'failed', '\x0100e2100b967b2274797065223a2256616c75654572726f72222c226d657373616765223a2263616e6e6f742072656164206f6d656761222c2273746570223a226578706c6f6465222c22736571223a322c22617474656d707473223a312c2274726163656261636b223a2254726163656261636b20286d6f737420726563656e742063616c6c206c617374293a5c6e202046696c65205c222f746d702f6f6c646d61696e2f7372632f726573756d61626c652f5f656e67696e652f73746570732e70795c222c206c696e65203138362c20696e205f72756e5f617474656d7074735c6e20202020726573756c74203d20617761697420737065632e666e282a617267732c202a2a6b7761726773295c6e202020202020202020202020205e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5c6e202046696c65205c222f776f726b2f6d61696e2f74657374732f73746f7265732f73746f7265645f646174612f666c6f77732e70795c222c206c696e652033362c20696e206578706c6f64655c6e2020202072616973652056616c75654572726f7228665c2263616e6e6f742072656164207b646f637d5c22295c6e56616c75654572726f723a2063616e6e6f742072656164206f6d6567615c6e227d', 1, 1795685543864, 1795685543866, NULL);


--
-- Name: resumable_chunks resumable_chunks_pkey; Type: CONSTRAINT; Schema: resumable_stored; Owner: -
--

ALTER TABLE ONLY resumable_stored.resumable_chunks
    ADD CONSTRAINT resumable_chunks_pkey PRIMARY KEY (hash);


--
-- Name: resumable_inputs resumable_inputs_pkey; Type: CONSTRAINT; Schema: resumable_stored; Owner: -
--

ALTER TABLE ONLY resumable_stored.resumable_inputs
    ADD CONSTRAINT resumable_inputs_pkey PRIMARY KEY (run_id, key);


--
-- Name: resumable_meta resumable_meta_pkey; Type: CONSTRAINT; Schema: resumable_stored; Owner: -
--

ALTER TABLE ONLY resumable_stored.resumable_meta
    ADD CONSTRAINT resumable_meta_pkey PRIMARY KEY (key);


--
-- Name: resumable_runs resumable_runs_pkey; Type: CONSTRAINT; Schema: resumable_stored; Owner: -
--

ALTER TABLE ONLY resumable_stored.resumable_runs
    ADD CONSTRAINT resumable_runs_pkey PRIMARY KEY (run_id);


--
-- Name: resumable_snapshot_chunks resumable_snapshot_chunks_pkey; Type: CONSTRAINT; Schema: resumable_stored; Owner: -
--

ALTER TABLE ONLY resumable_stored.resumable_snapshot_chunks
    ADD CONSTRAINT resumable_snapshot_chunks_pkey PRIMARY KEY (thread_id, namespace, checkpoint_id, hash);


--
-- Name: resumable_snapshots resumable_snapshots_pkey; Type: CONSTRAINT; Schema: resumable_stored; Owner: -
--

ALTER TABLE ONLY resumable_stored.resumable_snapshots
    ADD CONSTRAINT resumable_snapshots_pkey PRIMARY KEY (thread_id, namespace, checkpoint_id);


--
-- Name: resumable_steps resumable_steps_pkey; Type: CONSTRAINT; Schema: resumable_stored; Owner: -
--

ALTER TABLE ONLY resumable_stored.resumable_steps
    ADD CONSTRAINT resumable_steps_pkey PRIMARY KEY (run_id, seq);


--
-- Name: resumable_queue_starts_queue; Type: INDEX; Schema: resumable_stored; Owner: -
--

CREATE INDEX resumable_queue_starts_queue ON resumable_stored.resumable_queue_starts USING btree (queue, started_at_ms);


--
-- Name: resumable_runs_created; Type: INDEX; Schema: resumable_stored; Owner: -
--

CREATE INDEX resumable_runs_created ON resumable_stored.resumable_runs USING btree (created_at_ms, run_id);


--
-- Name: resumable_runs_expires; Type: INDEX; Schema: resumable_stored; Owner: -
--

CREATE INDEX resumable_runs_expires ON resumable_stored.resumable_runs USING btree (expires_at_ms) WHERE (expires_at_ms IS NOT NULL);


--
-- Name: resumable_runs_forked; Type: INDEX; Schema: resumable_stored; Owner: -
--

CREATE INDEX resumable_runs_forked ON resumable_stored.resumable_runs USING btree (forked_from) WHERE (forked_from IS NOT NULL);


--
-- Name: resumable_runs_parent; Type: INDEX; Schema: resumable_stored; Owner: -
--

CREATE INDEX resumable_runs_parent ON resumable_stored.resumable_runs USING btree (parent_id) WHERE (parent_id IS NOT NULL);


--
-- Name: resumable_runs_pending; Type: INDEX; Schema: resumable_stored; Owner: -
--

CREATE INDEX resumable_runs_pending ON resumable_stored.resumable_runs USING btree (created_at_ms, run_id) WHERE (status = ANY (ARRAY['queued'::text, 'running'::text, 'sleeping'::text, 'waiting'::text]));


--
-- Name: resumable_runs_queue; Type: INDEX; Schema: resumable_stored; Owner: -
--

CREATE INDEX resumable_runs_queue ON resumable_stored.resumable_runs USING btree (queue, status) WHERE (queue IS NOT NULL);


--
-- Name: resumable_runs_status; Type: INDEX; Schema: resumable_stored; Owner: -
--

CREATE INDEX resumable_runs_status ON resumable_stored.resumable_runs USING btree (status, updated_at_ms);


--
-- Name: resumable_snapshot_chunks_hash; Type: INDEX; Schema: resumable_stored; Owner: -
--

CREATE INDEX resumable_snapshot_chunks_hash ON resumable_stored.resumable_snapshot_chunks USING btree (hash);


--
-- PostgreSQL database dump complete
--

\unrestrict bdJ282Wt2u8JJBck8uM8eCPpWbvR4DBCX698Njr0czTQyhbj5VtjWdCVP3100FX

